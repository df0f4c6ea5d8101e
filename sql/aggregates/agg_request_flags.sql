-- The aggregate tier (see agg_request_minutes): the request rows holding a value no real service logs, with the
-- values the checks read (fct_request_flags names the flag and writes the reason). Only such rows are kept: a
-- handful where a fleet has a unit error, none where it has not. The bounds are CARD_MIN_BYTES, CARD_MAX_BYTES
-- and IMPLAUSIBLE_LATENCY_MS (sql/macros/oomlab_settings.sql, with why).
CREATE OR REPLACE VIEW agg_request_flags AS
SELECT source_id, line, ts, instance, gpu_index, request_id, device_total, latency_ms
FROM stg_requests
WHERE (device_total > 0 AND device_total < CARD_MIN_BYTES()) OR device_total > CARD_MAX_BYTES()
   OR latency_ms > IMPLAUSIBLE_LATENCY_MS();
