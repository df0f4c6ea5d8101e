-- requests as the fleet views read them: the device index defaults to 0 (a log that names no GPU ran on one),
-- `is_oom` says whether the request ended in an out-of-memory error (an oom status or an OOM message), and
-- `pid` is the serving process's id when the log line carries one (`pid`, `process_id` or `worker_pid`,
-- kept in `extra`): a new pid on a device is a process start, whatever the memory did. Rows dated where no GPU
-- log can be (before TS_EARLIEST or more than TS_AHEAD ahead: ingest rejects them now, an earlier version may
-- have loaded them) are left out, so that one year-9999 row cannot stretch every time range.
CREATE OR REPLACE VIEW stg_requests AS
SELECT * REPLACE (coalesce(gpu_index, 0) AS gpu_index),
       coalesce(oomlab_is_oom(status, error), false) AS is_oom,
       TRY_CAST(coalesce(extra ->> 'pid', extra ->> 'process_id', extra ->> 'worker_pid') AS BIGINT) AS pid
FROM requests
WHERE ts BETWEEN TS_EARLIEST() AND CAST(now() AS TIMESTAMP) + TS_AHEAD();
