-- A timestamp from text: ISO 8601 with or without zone, numbers (oomlab_ts_number: epochs, or times from the log's
-- start after `anchor`, in `unit_us` microseconds per unit, 0 when not stated), or nvidia-smi's
-- '2026/11/30 01:49:09.001'. Naive values are read in `tz` (UTC when NULL). Result: naive UTC.
CREATE OR REPLACE MACRO oomlab_ts_text(v, tz, anchor, unit_us) AS
    CASE
        WHEN v IS NULL OR trim(v) = '' THEN NULL
        WHEN try_cast(v AS DOUBLE) IS NOT NULL THEN oomlab_ts_number(try_cast(v AS DOUBLE), anchor, unit_us)
        WHEN suffix(v, 'Z') THEN try_cast(left(v, -1) AS TIMESTAMP)
        WHEN regexp_matches(v, '[+-][0-9]{2}:?[0-9]{2}$')
            THEN try_cast(v AS TIMESTAMPTZ) AT TIME ZONE 'UTC'
        ELSE oomlab_ts_naive(
            try_cast(regexp_replace(trim(v), '^([0-9]{4})/([0-9]{2})/([0-9]{2})', '\1-\2-\3') AS TIMESTAMP), tz)
    END;
