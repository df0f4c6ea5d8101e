-- The aggregate tier (see agg_request_minutes): per device (instance x GPU) whose card size is known and clock hour
-- (UTC), the water levels of its requests: the highest memory held between requests (reserved_after, else
-- allocated_after, over the card), allocated after a request, peak during one (the most of peak_allocated,
-- reserved and allocated), the largest need (peak_allocated - allocated_before) and the largest of a successful
-- request; the hour's first request and the model version it ran; the process lifetimes that started in the
-- hour; and how long each level was held (a request's until the next one, at most MAX_HOLD_S), which
-- oomlab_water_hourly turns into time above the alert levels. A lifetime starts at a device's first request, at a model version change (a deploy restarts the process)
-- or where allocated_before drops more than RESTART_DROP_MIN_BYTES or RESTART_DROP_SHARE of the card below what the
-- previous request left (inside one process allocated_before continues allocated_after; where a log states no
-- allocated_after, the previous request's allocated_before stands in, as a process's baseline moves by no more than
-- a request leaves behind). Requests are ordered by
-- time, then file and line, so that requests logged in the same microsecond are ordered alike on every engine.
-- Rows with sizes no device can have (loaded by an earlier version) are left out, as in fct_water_requests.
CREATE OR REPLACE VIEW agg_water_hours AS
WITH ordered AS (
    SELECT
        instance,
        gpu_index,
        model_version,
        ts,
        source_id,
        line,
        is_oom,
        device_total,
        allocated_after,
        peak_allocated,
        reserved_after,
        coalesce(reserved_after, allocated_after) AS held_bytes,
        greatest(peak_allocated, reserved_before, reserved_after, allocated_after) AS peak_bytes,
        greatest(peak_allocated - allocated_before, 0) AS need_bytes,
        coalesce(
            lag(ts) OVER w IS NULL
            OR model_version IS DISTINCT FROM lag(model_version) OVER w
            OR allocated_before < coalesce(lag(allocated_after) OVER w, lag(allocated_before) OVER w)
                                  - greatest(RESTART_DROP_MIN_BYTES(), RESTART_DROP_SHARE() * device_total),
            false) AS starts_lifetime,
        lead(ts) OVER w AS next_ts,
        -- the request's place in its device's order: the hour's first and last request below are picked by this
        -- one integer, which the window's sort gives for nothing; keyed by (ts, source_id, line) the arg_min and
        -- arg_max compare structs (measured on 10M requests: this view took 2.8 s that way, 2.25 s this way)
        row_number() OVER w AS seq
    FROM stg_requests
    WHERE device_total > 0 AND instance IS NOT NULL
      AND sizes_possible
    WINDOW w AS (PARTITION BY instance, gpu_index ORDER BY ts, source_id, line)
), held AS (
    SELECT
        *,
        held_bytes / device_total AS held_level,
        peak_bytes / device_total AS peak_level,
        -- the seconds its held level lasted: until the next request, at most MAX_HOLD_S (0 for a device's last)
        least(coalesce(date_diff('microsecond', ts, next_ts) / 1e6, 0), MAX_HOLD_S()) AS hold_s
    FROM ordered
), closing AS (
    -- what a request would leave for the next hour were it the hour's last (oomlab_water_hourly cuts its hold at
    -- a window's end), as a struct: next_ts is NULL for a device's last request, and a struct is never NULL, so
    -- DuckDB's arg_max (which skips a NULL value) and Spark's max_by pick the same request
    SELECT *, struct_pack(next_ts := next_ts, held_level := held_level, hold_s := hold_s) AS last
    FROM held
)
SELECT
    instance,
    gpu_index,
    date_trunc('hour', ts) AS hour,
    min(ts) AS first_ts,
    -- the version of the hour's first request (one that names none is passed over, as DuckDB's arg_min does)
    arg_min(model_version, seq) FILTER (WHERE model_version IS NOT NULL) AS model_version,
    max(device_total) AS device_total,
    count(*) AS requests,
    count(*) FILTER (WHERE is_oom) AS ooms,
    max(held_level) AS held_level,
    max(allocated_after / device_total) AS allocated_level,
    max(peak_level) AS peak_level,
    max(need_bytes) AS need_bytes,
    max(need_bytes) FILTER (WHERE NOT is_oom AND need_bytes > 0) AS max_ok_need_bytes,
    max(peak_allocated) AS peak_allocated_bytes,
    max(peak_bytes) AS peak_bytes,
    count(*) FILTER (WHERE starts_lifetime) AS lifetime_starts,
    -- whether the hour's first request starts a lifetime (starts_lifetime is never NULL, so DuckDB's arg_min and
    -- Spark's min_by pick alike); like the hour's last request below, an aggregate rather than a window per hour:
    -- on Spark each window is one more sort of every request
    CAST(arg_min(starts_lifetime, seq) AS BIGINT) AS starts_at_first,
    max(ts) AS last_ts,
    max(reserved_after) AS peak_reserved_bytes,
    min(device_total - held_bytes) AS min_free_bytes,
    -- how long the levels were held (oomlab_water_hourly): in all, above each of ALERT_LEVELS, weighted by level;
    -- and the hour's last request, whose hold a window's end cuts short
    sum(hold_s) AS hold_s,
    coalesce(sum(hold_s) FILTER (WHERE held_level >= ALERT_LEVELS()[1]), 0) AS hold_above_70,
    coalesce(sum(hold_s) FILTER (WHERE held_level >= ALERT_LEVELS()[2]), 0) AS hold_above_85,
    coalesce(sum(hold_s) FILTER (WHERE held_level >= ALERT_LEVELS()[3]), 0) AS hold_above_95,
    count(*) FILTER (WHERE peak_level >= ALERT_LEVELS()[1]) AS peaks_above_70,
    count(*) FILTER (WHERE peak_level >= ALERT_LEVELS()[2]) AS peaks_above_85,
    count(*) FILTER (WHERE peak_level >= ALERT_LEVELS()[3]) AS peaks_above_95,
    sum(held_level * hold_s) AS level_hold_s,
    struct_extract(arg_max(last, seq), 'next_ts') AS last_next_ts,
    struct_extract(arg_max(last, seq), 'held_level') AS last_held_level,
    struct_extract(arg_max(last, seq), 'hold_s') AS last_hold_s
FROM closing
GROUP BY instance, gpu_index, date_trunc('hour', ts);
