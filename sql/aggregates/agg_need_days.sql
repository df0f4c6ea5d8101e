-- The aggregate tier (see agg_request_minutes): per device (as agg_water_hours: card known, sizes possible), UTC
-- day and bucket of need (peak_allocated - allocated_before, at least 0; oomlab_fine_bucket, under 0.8 % wide):
-- the requests and the largest need in the bucket. The forecast reads the distribution of recent needs from it
-- (q_forecast_request_needs) without every request's. Per day, not per hour: a device's needs fill several hundred
-- buckets in an hour of varied prompts (3.4M rows for 8.3M requests of the sample fleet at 10M), and a day bounds
-- that by devices x days x buckets.
CREATE OR REPLACE VIEW agg_need_days AS
WITH needs AS (
    SELECT instance, gpu_index, CAST(ts AS DATE) AS day,
           greatest(peak_allocated - allocated_before, 0) AS need_bytes
    FROM stg_requests
    WHERE device_total > 0 AND instance IS NOT NULL
      AND sizes_possible
), guessed AS (
    -- the fine bucket a step a column (oomlab_pow2_guess): inline it is twenty logarithms a row
    SELECT *, oomlab_pow2_guess(need_bytes) AS need_guess FROM needs
), settled AS (
    SELECT *, oomlab_pow2_settle(need_bytes, need_guess) AS need_pow2 FROM guessed
), bucketed AS (
    SELECT *, oomlab_fine_of_pow2(need_bytes, need_pow2) AS need_bucket FROM settled
)
SELECT instance, gpu_index, day, need_bucket, count(*) AS requests, max(need_bytes) AS need_bytes
FROM bucketed
GROUP BY instance, gpu_index, day, need_bucket;
