-- Request rows that were loaded but hold a value no real service logs: nothing in them is impossible (those
-- rows are set aside at ingest), so they are kept, and flagged here for a person to check. One row per row and
-- flag: `flag` names the check (what the data-quality note counts), `reason` gives the numbers. The bounds are
-- CARD_MIN_BYTES, CARD_MAX_BYTES and IMPLAUSIBLE_LATENCY_MS (sql/macros/oomlab_settings.sql, with why).
CREATE OR REPLACE VIEW fct_request_flags AS
WITH checks AS (
    SELECT
        source_id, line, ts, instance, gpu_index, request_id,
        unnest([
            CASE WHEN device_total > 0 AND device_total < CARD_MIN_BYTES()
                 THEN {'flag': 'device_total below any card',
                       'reason': 'device_total ' || oomlab_format_bytes(device_total) || ' is below any card ('
                                 || oomlab_format_bytes(CARD_MIN_BYTES()) || '): a size in MiB or KiB?'} END,
            CASE WHEN device_total > CARD_MAX_BYTES()
                 THEN {'flag': 'device_total above any card',
                       'reason': 'device_total ' || oomlab_format_bytes(device_total) || ' is above any card ('
                                 || oomlab_format_bytes(CARD_MAX_BYTES()) || ')'} END,
            CASE WHEN latency_ms > IMPLAUSIBLE_LATENCY_MS()
                 THEN {'flag': 'latency over a day',
                       'reason': printf('latency_ms %.0f is %.1f days', latency_ms, latency_ms / 86400000)} END
        ]) AS checked
    -- the few rows with a flag, picked by the aggregate tier: unnesting every row of a large fleet costs seconds
    FROM agg_request_flags
)
SELECT source_id, line, ts, instance, gpu_index, request_id, checked.flag AS flag, checked.reason AS reason
FROM checks
WHERE checked IS NOT NULL;
