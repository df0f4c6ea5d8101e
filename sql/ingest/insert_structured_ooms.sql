-- One oom_events row per request of this source that ended in an out-of-memory error (an oom status
-- or an OOM message: source_ooms, stage_source_ooms.sql). Fields parsed from the message (table
-- parsed_messages, keyed by the message text) fill in; where both state a size, the logged value wins unless the
-- message's is finer (oomlab_logged_or_printed).
INSERT INTO oom_events (source_id, line, ts, instance, gpu_index, model_version, framework, origin,
    requested_bytes, total_capacity_bytes, free_bytes, already_allocated_bytes, reserved_bytes,
    allocated_by_pytorch_bytes, reserved_unallocated_bytes, process_in_use_bytes, allowed_bytes,
    private_pool_bytes, other_processes, batch_size, input_sequence_length, output_sequence_length,
    message, request_id)
SELECT r.source_id, r.line, r.ts, r.instance, coalesce(r.gpu_index, p.gpu_index), r.model_version,
       p.framework, 'structured',
       oomlab_logged_or_printed(r.requested_size, p.requested_bytes), p.total_capacity_bytes,
       oomlab_logged_or_printed(r.available_memory, p.free_bytes), p.already_allocated_bytes,
       oomlab_logged_or_printed(r.reserved_memory, p.reserved_bytes),
       oomlab_logged_or_printed(r.allocator_allocated, p.allocated_by_pytorch_bytes), p.reserved_unallocated_bytes,
       p.process_in_use_bytes, p.allowed_bytes, p.private_pool_bytes, p.other_processes,
       r.batch_size, r.input_sequence_length, r.output_sequence_length, coalesce(p.message, r.error),
       r.request_id
FROM source_ooms r
LEFT JOIN parsed_messages p ON p.error = r.error
ORDER BY r.line;
