-- The allocated baseline of each instance in short time buckets (agg_baseline_buckets: 4096 over the instance's
-- time span, at least 1 ms each), with the process lifetime each bucket belongs to. Bucketing first keeps the
-- restart search small whatever the number of requests. A lifetime ends where the process restarted: the model
-- version changed (a deploy restarts the process), the log names another process id (`pid`, when its lines
-- carry one) or another pod, the allocated memory fell back toward the level a fresh
-- process of this version holds (a restart frees everything a leak piled up, a request never does), or the
-- instance logged nothing for 6 hours. The fall is measured against the growth above that fresh level, not
-- against the whole level: with 14 GiB of weights, a restart after 3 GiB of leak drops the level by only
-- 18 %, yet it gives back all of the growth. A fall needs BASELINE_DROP_MIN_BYTES unless an OOM came just before
-- it (in its bucket or the one before): a process that crashes at an OOM restarts at the fresh level however
-- little it had leaked, and a process that survives an OOM frees only the failed request's tensors, never what
-- the requests before it left, so after an OOM any fall back toward the fresh level is a restart.
-- `lifetime` counts from 1 per instance and GPU; `lifetime_start` is its first request (for a baseline
-- drop, the lowest reading of the bucket the drop happened in).
CREATE OR REPLACE VIEW fct_request_baselines AS
WITH buckets AS (
    SELECT * FROM agg_baseline_buckets
), levels AS (
    SELECT
        *,
        -- the lowest baseline of the BASELINE_LOOKBACK_BUCKETS before: one bucket whose requests kept a
        -- temporary tensor alive does not raise the level a restart is measured against
        min(baseline_bytes) OVER (w ROWS BETWEEN BASELINE_LOOKBACK_BUCKETS() PRECEDING AND 1 PRECEDING)
            AS running_bytes,
        -- what a fresh process of this version holds: the lowest baseline it showed on this device so far
        min(baseline_bytes) OVER (
            PARTITION BY instance, gpu_index, model_version ORDER BY bucket_start, bucket_end
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS fresh_bytes
    FROM buckets
    WINDOW w AS (PARTITION BY instance, gpu_index ORDER BY bucket_start, bucket_end)
), flagged AS (
    SELECT
        *,
        CASE
            WHEN lag(bucket_end) OVER w IS NULL THEN 'start'
            WHEN model_version IS DISTINCT FROM lag(model_version) OVER w THEN 'version_change'
            WHEN pid <> lag(pid) OVER w OR pod <> lag(pod) OVER w THEN 'process_start'
            WHEN running_bytes - low_bytes >= CASE WHEN ooms > 0 OR lag(ooms) OVER w > 0 THEN 1  -- any fall
                                                   ELSE BASELINE_DROP_MIN_BYTES() END
                 AND running_bytes - low_bytes >= RESTART_RETURN_SHARE() * (running_bytes - fresh_bytes)
                THEN 'baseline_drop'
            WHEN bucket_start - lag(bucket_end) OVER w >= LIFETIME_GAP() THEN 'gap'
        END AS restart_reason
    FROM levels
    WINDOW w AS (PARTITION BY instance, gpu_index ORDER BY bucket_start, bucket_end)
), numbered AS (
    SELECT
        *,
        count(restart_reason) OVER (
            PARTITION BY instance, gpu_index ORDER BY bucket_start, bucket_end ROWS UNBOUNDED PRECEDING
        ) AS lifetime
    FROM flagged
)
SELECT
    instance,
    gpu_index,
    lifetime,
    first_value(CASE WHEN restart_reason = 'baseline_drop' THEN low_ts ELSE bucket_start END) OVER (
        PARTITION BY instance, gpu_index, lifetime ORDER BY bucket_start, bucket_end
    ) AS lifetime_start,
    restart_reason,
    model_version,
    bucket,
    bucket_start,
    bucket_end,
    requests,
    ooms,
    baseline_bytes,
    baseline_ts,
    low_bytes,
    reserved_min_bytes,
    reserved_max_bytes,
    last_reserved_bytes,
    peak_bytes,
    device_total
FROM numbered;
