-- The aggregate tier (see agg_request_minutes): per instance and GPU, what the request log proves about the card.
-- `device_total` is the largest card size a row states; `max_ok_peak_bytes` the highest peak a request reached
-- without failing, `max_ok_held_bytes` the same with allocated_before where a row has no peak, among rows that
-- state a card; `p95_request_bytes` the 95th percentile of what a successful request added at its peak (exact:
-- both engines interpolate the same way, where their approximate quantiles would not agree; rounded to a byte,
-- and both engines round halves away from zero).
CREATE OR REPLACE VIEW agg_request_devices AS
SELECT
    instance,
    gpu_index,
    count(*) AS requests,
    count(*) FILTER (WHERE NOT is_oom) AS ok_requests,
    max(device_total) AS device_total,
    max(peak_allocated) FILTER (WHERE NOT is_oom) AS max_ok_peak_bytes,
    max(coalesce(peak_allocated, allocated_before)) FILTER (WHERE NOT is_oom AND device_total > 0)
        AS max_ok_held_bytes,
    CAST(round(quantile_cont(peak_allocated - allocated_before, LARGE_REQUEST_QUANTILE()) FILTER (WHERE NOT is_oom))
         AS BIGINT) AS p95_request_bytes
FROM stg_requests
GROUP BY instance, gpu_index;
