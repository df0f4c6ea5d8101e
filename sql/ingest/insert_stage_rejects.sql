-- Keep every row of a normalized stage that could not be loaded, with its reason (`ingest_staged` as in
-- insert_requests.sql). Run only when the accepted rows fall short of the rows read. The reasons a row's values
-- cannot be a device's are written here, from its canonical values, not in the stage's SELECT: DuckDB takes
-- about 0.15 s to plan them, which a file without rejects should not pay.
INSERT INTO rejects
SELECT $source_id,
       line,
       concat_ws('; ', reject_reason,
                 CASE WHEN NOT possible THEN oomlab_request_impossible(
                     gpu_index, latency_ms, batch_size, input_sequence_length, output_sequence_length,
                     requested_size, available_memory, allocator_allocated, reserved_memory, allocated_before,
                     allocated_after, reserved_before, reserved_after, peak_allocated, device_total) END),
       raw
FROM ingest_staged AS staged
WHERE reject_reason IS NOT NULL OR NOT possible;
