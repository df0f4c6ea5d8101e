-- One row per instance, model version and minute with requests (kind 'request', `requests` counted from the
-- aggregate tier's agg_request_minutes, `ts` the minute) and one per OOM event (kind 'oom', `ooms` 1), with the
-- cuts OOM rates are taken by: hour of day, ISO day of week (1 = Monday) and, for OOM events, power-of-two buckets
-- of the prompt features (oomlab_pow2_bucket; the requests' buckets are agg_request_buckets). OOMs come from
-- stg_oom_events, one per real OOM (keyed by its request-log row or message where one saw it); an event only a
-- snapshot recorded is left out because a snapshot is taken at a failure that is normally logged too, and OOMs
-- without a time are left out because every cut here is over time.
-- `first_ts` / `last_ts`: the first and last request of the minute (the OOM's own time for an OOM).
-- `has_request_log`: the instance has rows in `requests`, so its OOMs have a traffic denominator; text-log
-- only instances have OOMs but no counted requests. Time windows over these rows cut at the minute.
CREATE OR REPLACE VIEW fct_traffic_events AS
WITH logged AS (
    SELECT DISTINCT instance FROM agg_request_minutes
), served AS (
    SELECT instance, model_version, minute, CAST(sum(requests) AS BIGINT) AS requests,
           min(first_ts) AS first_ts, max(last_ts) AS last_ts
    FROM agg_request_minutes
    GROUP BY instance, model_version, minute
), raw AS (
    SELECT 'request' AS kind, minute AS ts, first_ts, last_ts, instance, model_version,
           CAST(NULL AS BIGINT) AS batch_size, CAST(NULL AS BIGINT) AS input_tokens,
           CAST(NULL AS BIGINT) AS output_tokens, true AS has_request_log, requests, 0 AS ooms
    FROM served
    UNION ALL
    SELECT 'oom', o.ts, o.ts, o.ts, o.instance, o.model_version, o.batch_size,
           o.input_sequence_length, o.output_sequence_length,
           o.instance IN (SELECT instance FROM logged), 0, 1
    FROM stg_oom_events o
    WHERE o.origin <> 'snapshot' AND o.ts IS NOT NULL
), featured AS (
    SELECT *, batch_size * (input_tokens + output_tokens) AS batch_tokens FROM raw
)
SELECT
    kind, ts, first_ts, last_ts, instance, model_version, coalesce(has_request_log, false) AS has_request_log,
    requests, ooms, batch_size, input_tokens, output_tokens, batch_tokens,
    hour(ts) AS hour_of_day,
    isodow(ts) AS day_of_week,
    oomlab_pow2_bucket(input_tokens) AS input_bucket,
    oomlab_pow2_bucket(output_tokens) AS output_bucket,
    oomlab_pow2_bucket(batch_size) AS batch_bucket,
    oomlab_pow2_bucket(batch_tokens) AS batch_tokens_bucket
FROM featured;
