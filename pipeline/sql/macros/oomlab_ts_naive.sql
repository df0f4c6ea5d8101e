-- A naive timestamp read in zone `tz` (UTC when tz is NULL), as naive UTC.
CREATE OR REPLACE MACRO oomlab_ts_naive(t, tz) AS
    CASE WHEN tz IS NULL THEN t ELSE timezone(tz, t) AT TIME ZONE 'UTC' END;
