-- Epoch seconds, milliseconds, microseconds or nanoseconds (told apart by magnitude) as a UTC timestamp.
-- NULL for a number no timestamp can hold (DuckDB's range ends near +-2^63 microseconds): a bad value is a
-- reject with its reason, never an error that stops the file.
CREATE OR REPLACE MACRO oomlab_ts_epoch(x) AS
    CASE WHEN abs(x) < 9e18 THEN make_timestamp(CAST(round(
        CASE WHEN abs(x) >= 1e17 THEN x / 1000
             WHEN abs(x) >= 1e14 THEN x
             WHEN abs(x) >= 1e11 THEN x * 1000
             ELSE x * 1000000 END) AS BIGINT)) END;
