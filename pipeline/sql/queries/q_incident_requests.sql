-- Requests of one instance in [$since, $until): the incident timeline's memory and traffic.
-- Used by oomlab.report.incident_data.
SELECT ts, request_id, gpu_index, model_version, is_oom, batch_size, input_sequence_length,
       output_sequence_length, allocated_after, reserved_after, peak_allocated, device_total
FROM stg_requests
WHERE instance = $instance AND ts >= $since::TIMESTAMP AND ts < $until::TIMESTAMP
ORDER BY ts, request_id;
