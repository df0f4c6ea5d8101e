-- Per instance and GPU, what the request log proves about its memory limit: the highest peak a request
-- reached without failing, the device size, and the per-process cap its OOM messages name (`X allowed`);
-- also the typical large request: the 95th percentile of peak_allocated - allocated_before.
CREATE OR REPLACE VIEW fct_oom_instance_limits AS
WITH served AS (
    SELECT instance, gpu_index, device_total, max_ok_peak_bytes, ok_requests, p95_request_bytes
    FROM agg_request_devices
    WHERE instance IS NOT NULL
), messages AS (
    SELECT
        instance,
        coalesce(gpu_index, 0) AS gpu_index,
        -- a message whose sizes contradict its total (stg_oom_events.contradiction) sets no device size
        max(total_capacity_bytes) FILTER (WHERE contradiction IS NULL) AS message_total_bytes,
        max(allowed_bytes) AS cap_bytes
    FROM stg_oom_events
    WHERE instance IS NOT NULL
    GROUP BY ALL
)
SELECT
    instance,
    gpu_index,
    coalesce(s.device_total, m.message_total_bytes) AS device_total,
    m.message_total_bytes,
    m.cap_bytes,
    s.max_ok_peak_bytes,
    coalesce(s.ok_requests, 0) AS ok_requests,
    s.p95_request_bytes
FROM served AS s
FULL OUTER JOIN messages AS m USING (instance, gpu_index);
