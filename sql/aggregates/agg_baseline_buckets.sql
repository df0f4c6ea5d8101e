-- The aggregate tier (see agg_request_minutes): the allocated baseline of each instance and GPU in short time
-- buckets (BASELINE_BUCKETS over the device's time span, at least MIN_BUCKET_US each), per model version and
-- process (pid or pod), so that process lifetimes and leaks (fct_request_baselines) are found on at most a few thousand
-- rows per device whatever the number of requests. The baseline is allocated_after, or allocated_before on a
-- device whose log states no allocated_after. Ties go to the earliest reading, so reruns and engines agree.
CREATE OR REPLACE VIEW agg_baseline_buckets AS
WITH states_after AS (
    -- the devices whose log states allocated_after; in a log that states only allocated_before, that is the
    -- baseline instead (inside one process a request starts with what the one before it left)
    SELECT DISTINCT instance, gpu_index FROM stg_requests WHERE allocated_after IS NOT NULL
), readings AS (
    -- states_after is a row per device: joined by broadcast on Spark, as spans below
    SELECT /*+ BROADCAST(a) */
        q.instance,
        q.gpu_index,
        q.ts,
        q.model_version,
        q.pid,
        q.pod,
        q.is_oom,
        coalesce(q.allocated_before, q.allocated_after) AS level_before,
        CASE WHEN a.instance IS NULL THEN q.allocated_before ELSE q.allocated_after END AS baseline_reading,
        q.reserved_after,
        q.peak_allocated,
        q.device_total,
        q.source_id,
        q.line
    FROM stg_requests AS q
    LEFT JOIN states_after AS a ON a.instance = q.instance AND a.gpu_index = q.gpu_index
    WHERE (q.allocated_after IS NOT NULL OR (a.instance IS NULL AND q.allocated_before IS NOT NULL))
      AND q.instance IS NOT NULL
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
    r.pod,
    date_diff('microsecond', s.first_ts, r.ts) // s.bucket_us AS bucket,
    min(r.ts) AS bucket_start,
    max(r.ts) AS bucket_end,
    count(*) AS requests,
    count(*) FILTER (WHERE r.is_oom) AS ooms,
    min(r.baseline_reading) AS baseline_bytes,
    arg_min(r.ts, (r.baseline_reading, r.ts)) AS baseline_ts,
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
GROUP BY r.instance, r.gpu_index, r.model_version, r.pid, r.pod, date_diff('microsecond', s.first_ts, r.ts) // s.bucket_us;
