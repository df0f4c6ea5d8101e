-- The aggregate tier (see agg_request_minutes): per device (as agg_water_hours: card known, sizes possible), clock
-- hour and bucket of need (peak_allocated - allocated_before, at least 0; oomlab_fine_bucket, under 0.8 % wide):
-- the requests and the largest need in the bucket. The forecast reads the distribution of recent needs from it
-- (q_forecast_request_needs) without every request's.
CREATE OR REPLACE VIEW agg_need_hours AS
WITH needs AS (
    SELECT instance, gpu_index, date_trunc('hour', ts) AS hour,
           greatest(peak_allocated - allocated_before, 0) AS need_bytes
    FROM stg_requests
    WHERE device_total > 0 AND instance IS NOT NULL
      AND sizes_possible
)
SELECT instance, gpu_index, hour, oomlab_fine_bucket(need_bytes) AS need_bucket, count(*) AS requests,
       max(need_bytes) AS need_bytes
FROM needs
GROUP BY instance, gpu_index, hour, oomlab_fine_bucket(need_bytes);
