-- requests as the fleet views read them: the device index defaults to 0 (a log that names no GPU ran on one),
-- `is_oom` says whether the request ended in an out-of-memory error (an oom status or an OOM message), and
-- `pid` is the serving process's id when the log line carries one (`pid`, `process_id` or `worker_pid`,
-- kept in `extra`): a new pid on a device is a process start, whatever the memory did; so is a new `pod` (a
-- Kubernetes pod, or container, is one process lifetime and is renamed on every restart; the node is the device). Rows dated where no GPU
-- log can be (before TS_EARLIEST or from TS_LATEST on: ingest rejects them now, an earlier version may
-- have loaded them) are left out, so that one year-9999 row cannot stretch every time range.
-- `allocated_before` is the logged one, else what the request left (allocated_after): a request frees what it
-- allocated, so it ends where it started, give or take what a leak keeps of it (a leak's bytes per request are
-- far under the request's own need). A log that states only the level after each request still sizes its
-- requests (peak - before) and its OOMs' baselines. A successful line that states the allocator's level with no
-- before or after (`allocated`, `memory_reserved`: memory_allocated() when the line was written, after its work)
-- states the level after (oomlab_level_logged); on an OOM line that level is the one the OOM met, not after.
-- The columns are named, not `* REPLACE`, so that the aggregate tier runs this view on Spark too (load/portable.py;
-- Spark has no REPLACE) and a lake's partition column `date` stays out.
CREATE OR REPLACE VIEW stg_requests AS
SELECT ts, instance, coalesce(gpu_index, 0) AS gpu_index, model_version, request_id, status, error, latency_ms,
       batch_size, input_sequence_length, output_sequence_length, requested_size, available_memory,
       allocator_allocated, reserved_memory,
       coalesce(allocated_before, allocated_after, oomlab_level_logged(status, error, allocator_allocated))
           AS allocated_before,
       coalesce(allocated_after, oomlab_level_logged(status, error, allocator_allocated)) AS allocated_after,
       reserved_before,
       coalesce(reserved_after, oomlab_level_logged(status, error, reserved_memory)) AS reserved_after,
       peak_allocated, device_total, source_id, line, extra,
       coalesce(oomlab_is_oom(status, error), false) AS is_oom,
       -- whether its sizes could be a device's (oomlab_request_possible; false only for rows an earlier version
       -- loaded): computed only where a view reads it
       oomlab_request_possible(
           gpu_index, latency_ms, batch_size, input_sequence_length, output_sequence_length, requested_size,
           available_memory, allocator_allocated, reserved_memory, allocated_before, allocated_after,
           reserved_before, reserved_after, peak_allocated, device_total) AS sizes_possible,
       TRY_CAST(coalesce(extra ->> 'pid', extra ->> 'process_id', extra ->> 'worker_pid') AS BIGINT) AS pid,
       coalesce(extra ->> 'pod', extra ->> 'pod_name', extra ->> 'kubernetes.pod_name', extra ->> 'container_id')
           AS pod
FROM requests
WHERE ts >= TS_EARLIEST() AND ts < TS_LATEST();
