-- One row per request (kind 'request') and per OOM event (kind 'oom'), with the cuts OOM rates are taken by:
-- hour of day, ISO day of week (1 = Monday) and power-of-two buckets of the prompt features (a bucket is
-- named by its lower bound b and holds b .. 2b-1; 0 holds 0). OOMs come from oom_events (origins
-- `structured` and `message`); `snapshot` OOMs are left out because a snapshot is taken at a failure that
-- is normally logged too, and OOMs without a time are left out because every cut here is over time.
-- `has_request_log`: the instance has rows in `requests`, so its OOMs have a traffic denominator; text-log
-- only instances have OOMs but no counted requests.
CREATE OR REPLACE VIEW fct_traffic_events AS
WITH logged AS (
    SELECT DISTINCT instance FROM stg_requests
), raw AS (
    SELECT 'request' AS kind, ts, instance, model_version, batch_size,
           input_sequence_length AS input_tokens, output_sequence_length AS output_tokens,
           is_oom, true AS has_request_log
    FROM stg_requests
    UNION ALL
    SELECT 'oom', o.ts, o.instance, o.model_version, o.batch_size,
           o.input_sequence_length, o.output_sequence_length,
           true, o.instance IN (SELECT instance FROM logged)
    FROM stg_oom_events o
    WHERE o.origin <> 'snapshot' AND o.ts IS NOT NULL
), featured AS (
    SELECT *, batch_size * (input_tokens + output_tokens) AS batch_tokens FROM raw
)
SELECT
    kind, ts, instance, model_version, is_oom, coalesce(has_request_log, false) AS has_request_log,
    batch_size, input_tokens, output_tokens, batch_tokens,
    hour(ts) AS hour_of_day,
    isodow(ts) AS day_of_week,
    -- floor(log2) is exact for these magnitudes (< 2^50), so powers of two land in their own bucket
    CASE WHEN input_tokens > 0 THEN (2 ** floor(log2(input_tokens)))::BIGINT WHEN input_tokens = 0 THEN 0 END
        AS input_bucket,
    CASE WHEN output_tokens > 0 THEN (2 ** floor(log2(output_tokens)))::BIGINT WHEN output_tokens = 0 THEN 0 END
        AS output_bucket,
    CASE WHEN batch_size > 0 THEN (2 ** floor(log2(batch_size)))::BIGINT WHEN batch_size = 0 THEN 0 END
        AS batch_bucket,
    CASE WHEN batch_tokens > 0 THEN (2 ** floor(log2(batch_tokens)))::BIGINT WHEN batch_tokens = 0 THEN 0 END
        AS batch_tokens_bucket
FROM featured;
