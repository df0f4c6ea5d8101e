-- The aggregate tier (see agg_request_minutes): the allocated baseline of each instance and GPU in short time
-- buckets (BASELINE_BUCKETS over the device's time span, at least MIN_BUCKET_US each), per model version and
-- process id, so that process lifetimes and leaks (fct_request_baselines) are found on at most a few thousand
-- rows per device whatever the number of requests. Ties go to the earliest reading, so reruns and engines agree.
CREATE OR REPLACE VIEW agg_baseline_buckets AS
WITH readings AS (
    SELECT
        instance,
        gpu_index,
        ts,
        model_version,
        pid,
        is_oom,
        coalesce(allocated_before, allocated_after) AS level_before,
        allocated_after,
        reserved_after,
        peak_allocated,
        device_total,
        source_id,
        line
    FROM stg_requests
    WHERE allocated_after IS NOT NULL AND instance IS NOT NULL
), spans AS (
    SELECT
        instance,
        gpu_index,
        min(ts) AS first_ts,
        greatest(MIN_BUCKET_US(), date_diff('microsecond', min(ts), max(ts)) // BASELINE_BUCKETS() + 1) AS bucket_us
    FROM readings
    GROUP BY instance, gpu_index
)
-- spans is a row per device: joined by broadcast on Spark (load/portable.py), not by a shuffle of every request
SELECT /*+ BROADCAST(s) */
    r.instance,
    r.gpu_index,
    r.model_version,
    r.pid,
    date_diff('microsecond', s.first_ts, r.ts) // s.bucket_us AS bucket,
    min(r.ts) AS bucket_start,
    max(r.ts) AS bucket_end,
    count(*) AS requests,
    count(*) FILTER (WHERE r.is_oom) AS ooms,
    min(r.allocated_after) AS baseline_bytes,
    arg_min(r.ts, (r.allocated_after, r.ts)) AS baseline_ts,
    min(r.level_before) AS low_bytes,
    arg_min(r.ts, (r.level_before, r.ts)) AS low_ts,
    min(r.reserved_after) AS reserved_min_bytes,
    max(r.reserved_after) AS reserved_max_bytes,
    -- the last reading; requests logged in the same microsecond are ordered by file and line, so both engines
    -- pick the same one, and a row without the reading is passed over (DuckDB's arg_max does, Spark's max_by not)
    arg_max(r.reserved_after, (r.ts, r.source_id, r.line)) FILTER (WHERE r.reserved_after IS NOT NULL)
        AS last_reserved_bytes,
    max(r.peak_allocated) FILTER (WHERE NOT r.is_oom) AS peak_bytes,
    max(r.device_total) AS device_total
FROM readings AS r
JOIN spans AS s ON s.instance = r.instance AND s.gpu_index = r.gpu_index
GROUP BY r.instance, r.gpu_index, r.model_version, r.pid, date_diff('microsecond', s.first_ts, r.ts) // s.bucket_us;
