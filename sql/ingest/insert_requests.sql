-- Load the accepted rows of a normalized stage. `ingest_staged` is the temp view of the SELECT built by
-- ingest/normalize.py (canonical columns, extra, line, reject_reason, possible, raw), made by ingest/requests.py
-- for this statement; labels from the command line fill gaps. A row whose values no device can have
-- (`possible` false) is set aside with the rows that did not convert (insert_stage_rejects.sql).
INSERT INTO requests
SELECT ts, coalesce(instance, $instance), gpu_index, coalesce(model_version, $model_version), request_id,
       status, error, latency_ms, batch_size, input_sequence_length, output_sequence_length,
       requested_size, available_memory, allocator_allocated, reserved_memory,
       allocated_before, allocated_after, reserved_before, reserved_after, peak_allocated, device_total,
       $source_id, line, extra
FROM ingest_staged AS staged
WHERE reject_reason IS NULL AND possible;
