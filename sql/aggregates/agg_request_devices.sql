-- The aggregate tier (see agg_request_minutes): per instance and GPU, what the request log proves about the card.
-- `device_total` is the largest card size a row states; `max_ok_peak_bytes` the highest peak a request reached
-- without failing, `max_ok_held_bytes` the same with allocated_before where a row has no peak, among rows that
-- state a card; `p95_request_bytes` the 95th percentile of what a successful request added at its peak, exact
-- and interpolated as quantile_cont does (between the values at ranks floor and ceil of q (n - 1)), rounded to a
-- byte (both engines round halves away from zero).
-- The percentile is not one quantile aggregate: an exact one holds every value of a device at once (Spark's
-- `percentile` builds a map of them: 21-36 s for 8.3M requests on local[2], and a device's week of requests in one
-- executor's memory at fleet scale). Instead the needs are counted per fine bucket (oomlab_fine_bucket, which keeps
-- their order), the counts say which one or two buckets hold the two ranks, and only those buckets' values are
-- ranked: bounded by devices x buckets plus the requests of two buckets a device (15-20 s on Spark; DuckDB 0.3 s ->
-- 0.75 s). tests/load/test_request_percentile.py holds it to quantile_cont.
CREATE OR REPLACE VIEW agg_request_devices AS
WITH needs AS (
    -- what a successful request added at its peak (NULL for the others), with its fine bucket a step a column
    -- (oomlab_pow2_guess: inline it is twenty logarithms a row)
    SELECT instance, gpu_index, is_oom, device_total, peak_allocated, allocated_before,
           CASE WHEN NOT is_oom THEN peak_allocated - allocated_before END AS need
    FROM stg_requests
), guessed AS (
    SELECT *, oomlab_pow2_guess(need) AS need_guess FROM needs
), settled AS (
    SELECT *, oomlab_pow2_settle(need, need_guess) AS need_pow2 FROM guessed
), bucketed AS (
    SELECT *, oomlab_fine_of_pow2(need, need_pow2) AS bucket FROM settled
), histogram AS (
    -- one pass for both: the device's counts and maxima by bucket of need (the requests without a need in one
    -- NULL bucket), summed per device below
    SELECT
        instance,
        gpu_index,
        bucket,
        bucket IS NOT NULL AS has_need,
        count(*) AS requests,
        count(*) FILTER (WHERE NOT is_oom) AS ok_requests,
        max(device_total) AS device_total,
        max(peak_allocated) FILTER (WHERE NOT is_oom) AS max_ok_peak_bytes,
        max(coalesce(peak_allocated, allocated_before)) FILTER (WHERE NOT is_oom AND device_total > 0)
            AS max_ok_held_bytes
    FROM bucketed
    GROUP BY instance, gpu_index, bucket, bucket IS NOT NULL
), devices AS (
    SELECT
        instance,
        gpu_index,
        CAST(sum(requests) AS BIGINT) AS requests,
        CAST(sum(ok_requests) AS BIGINT) AS ok_requests,
        max(device_total) AS device_total,
        max(max_ok_peak_bytes) AS max_ok_peak_bytes,
        max(max_ok_held_bytes) AS max_ok_held_bytes
    FROM histogram
    GROUP BY instance, gpu_index
), spans AS (
    -- each bucket's ranks among its device's needs in ascending order: [below, below + n); its needs lie from its
    -- lower bound up to the next bucket's (buckets keep the needs' order, and no need lies in an absent bucket).
    -- The NULL bucket is a partition of its own, left out by `wanted`: a filter on the bucket here would be pushed
    -- down to the requests on Spark, the whole bucket expression with it, and the histogram computed twice.
    SELECT
        instance, gpu_index, bucket, requests AS n,
        lead(bucket) OVER (PARTITION BY instance, gpu_index, has_need ORDER BY bucket) AS next_bucket,
        sum(requests) OVER (PARTITION BY instance, gpu_index, has_need ORDER BY bucket) - requests AS below,
        -- where quantile_cont interpolates: q (n - 1), in doubles as it computes it
        CAST(LARGE_REQUEST_QUANTILE() AS DOUBLE)
            * CAST(sum(requests) OVER (PARTITION BY instance, gpu_index, has_need) - 1 AS DOUBLE) AS position
    FROM histogram
), wanted AS (
    -- the bucket of the rank below the position and of the rank above it (one bucket, or two)
    SELECT instance, gpu_index, bucket, next_bucket, below, position
    FROM spans
    WHERE bucket IS NOT NULL
      AND ((floor(position) >= below AND floor(position) < below + n)
           OR (ceil(position) >= below AND ceil(position) < below + n))
), ranked AS (
    -- the wanted buckets' needs with their rank among the device's, found by their range of needs, not by
    -- computing each request's bucket again (on Spark a join on the bucket pushes the whole bucket expression into
    -- the scan's filter); a bucket of 0.8 % holds few requests next to the device's; `wanted` is one or two rows
    -- a device (broadcast on Spark, load/portable.py)
    SELECT /*+ BROADCAST(w) */
        r.instance, r.gpu_index, r.need, w.position,
        w.below + row_number() OVER (PARTITION BY r.instance, r.gpu_index, w.bucket ORDER BY r.need) - 1 AS need_rank
    FROM needs AS r
    JOIN wanted AS w
        ON w.instance IS NOT DISTINCT FROM r.instance AND w.gpu_index = r.gpu_index
       AND r.need >= w.bucket AND (w.next_bucket IS NULL OR r.need < w.next_bucket)
), percentiles AS (
    SELECT
        instance,
        gpu_index,
        CAST(max(need) FILTER (WHERE need_rank = floor(position)) AS DOUBLE) AS low,
        CAST(max(need) FILTER (WHERE need_rank = ceil(position)) AS DOUBLE) AS high,
        max(position) - floor(max(position)) AS fraction
    FROM ranked
    WHERE need_rank = floor(position) OR need_rank = ceil(position)
    GROUP BY instance, gpu_index
)
SELECT
    d.instance,
    d.gpu_index,
    d.requests,
    d.ok_requests,
    d.device_total,
    d.max_ok_peak_bytes,
    d.max_ok_held_bytes,
    CAST(round(p.low + (p.high - p.low) * p.fraction) AS BIGINT) AS p95_request_bytes
FROM devices AS d
LEFT JOIN percentiles AS p ON p.instance IS NOT DISTINCT FROM d.instance AND p.gpu_index = d.gpu_index;
