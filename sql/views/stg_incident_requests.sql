-- Each request with a time and an instance as the incident timeline draws it (agg_incident_minutes,
-- agg_incident_detail): its minute (UTC), the peak it plots (peak_allocated, else allocated_after), the order keys,
-- and the request's fields the timeline shows, whole as the struct `request`. Portable (load/portable.py).
CREATE OR REPLACE VIEW stg_incident_requests AS
SELECT
    instance,
    gpu_index,
    date_trunc('minute', ts) AS minute,
    ts,
    source_id,
    line,
    is_oom,
    coalesce(peak_allocated, allocated_after) AS plotted_peak,
    struct_pack(
        ts := ts,
        request_id := request_id,
        gpu_index := gpu_index,
        model_version := model_version,
        is_oom := is_oom,
        batch_size := batch_size,
        input_sequence_length := input_sequence_length,
        output_sequence_length := output_sequence_length,
        allocated_after := allocated_after,
        reserved_after := reserved_after,
        peak_allocated := coalesce(peak_allocated, allocated_after),
        device_total := device_total
    ) AS request
FROM stg_requests
WHERE instance IS NOT NULL AND ts IS NOT NULL;
