-- The windowed minimum of allocated-after (the baseline a leak raises) per process lifetime: each lifetime
-- is cut into equal time windows, one per 5 requests and at most 48, so a week-long lifetime and a
-- 20-second capture both get a fit. Also the cache level (reserved-after) and the highest request peak.
-- `first_baseline_bytes` / `last_baseline_bytes`: the baseline over the lifetime's first / last 5 buckets.
CREATE OR REPLACE VIEW fct_leak_windows AS
WITH lives AS (
    SELECT
        *,
        max(bucket_end) OVER life AS lifetime_end,
        greatest(1, least(LEAK_MAX_WINDOWS(), sum(requests) OVER life // LEAK_REQUESTS_PER_WINDOW())) AS windows,
        row_number() OVER (life ORDER BY bucket_start, bucket_end) AS from_start,
        row_number() OVER (life ORDER BY bucket_start DESC, bucket_end DESC) AS from_end
    FROM fct_request_baselines
    WINDOW life AS (PARTITION BY instance, gpu_index, lifetime)
), binned AS (
    SELECT
        *,
        least(
            windows - 1,
            floor(windows * date_diff('microsecond', lifetime_start, bucket_start)
                  / greatest(1, date_diff('microsecond', lifetime_start, lifetime_end)))
        )::INTEGER AS window_index
    FROM lives
)
SELECT
    instance,
    gpu_index,
    lifetime,
    greatest(0, window_index) AS window_index,
    any_value(model_version) AS model_version,
    any_value(lifetime_start) AS lifetime_start,
    any_value(lifetime_end) AS lifetime_end,
    -- how the lifetime began (start, version_change, baseline_drop, gap): set on its first window only
    any_value(restart_reason) FILTER (WHERE restart_reason IS NOT NULL) AS restart_reason,
    min(bucket_start) AS window_start,
    max(bucket_end) AS window_end,
    sum(requests)::BIGINT AS requests,
    sum(ooms)::BIGINT AS ooms,
    min(baseline_bytes) AS baseline_bytes,
    arg_min(baseline_ts, (baseline_bytes, baseline_ts)) AS baseline_ts,
    min(baseline_bytes) FILTER (WHERE from_start <= LEAK_END_BUCKETS()) AS first_baseline_bytes,
    min(baseline_bytes) FILTER (WHERE from_end <= LEAK_END_BUCKETS()) AS last_baseline_bytes,
    min(reserved_min_bytes) AS reserved_min_bytes,
    max(reserved_max_bytes) AS reserved_max_bytes,
    arg_max(last_reserved_bytes, bucket_end) AS last_reserved_bytes,
    max(peak_bytes) AS peak_bytes,
    max(device_total) AS device_total
FROM binned
GROUP BY instance, gpu_index, lifetime, greatest(0, window_index);
