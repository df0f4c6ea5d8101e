-- The requests of this source that ended in out-of-memory (an oom status or an OOM message), with what
-- insert_structured_ooms.sql takes of them: one scan of the source's requests, which select_source_errors.sql
-- and insert_structured_ooms.sql then read. A temporary table, dropped once they have run.
CREATE OR REPLACE TEMP TABLE source_ooms AS
SELECT source_id, line, ts, instance, gpu_index, model_version, requested_size, available_memory,
       reserved_memory, allocator_allocated, batch_size, input_sequence_length, output_sequence_length,
       error, request_id
FROM requests
WHERE source_id = $source_id
  AND oomlab_is_oom(status, error);
