-- Epoch seconds, milliseconds, microseconds or nanoseconds (told apart by magnitude) as a UTC timestamp.
CREATE OR REPLACE MACRO oomlab_ts_epoch(x) AS
    make_timestamp(CAST(round(
        CASE WHEN abs(x) >= 1e17 THEN x / 1000
             WHEN abs(x) >= 1e14 THEN x
             WHEN abs(x) >= 1e11 THEN x * 1000
             ELSE x * 1000000 END) AS BIGINT));
