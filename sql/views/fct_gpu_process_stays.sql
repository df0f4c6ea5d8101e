-- Each stay of a process on a GPU: the sampling rounds of stg_gpu_process_samples that listed its pid on that
-- device with no round between them missing it. The process existed at `first_seen`, so a scheduled job's run
-- that started later cannot be what brought it (oomlab.analyses.fleet.jobs, oomlab.findings.causes).
CREATE OR REPLACE VIEW fct_gpu_process_stays AS
WITH rounds AS (
    SELECT instance, gpu_index, round_ts,
           row_number() OVER (PARTITION BY instance, gpu_index ORDER BY round_ts) AS round_no
    FROM (SELECT DISTINCT instance, gpu_index, ts AS round_ts
          FROM stg_gpu_process_samples WHERE instance IS NOT NULL AND pid IS NOT NULL)
), listed AS (
    SELECT DISTINCT p.instance, p.gpu_index, p.pid, r.round_ts, r.round_no
    FROM stg_gpu_process_samples p
    JOIN rounds r ON r.instance = p.instance AND r.gpu_index IS NOT DISTINCT FROM p.gpu_index AND r.round_ts = p.ts
    WHERE p.pid IS NOT NULL
), islands AS (
    -- gaps and islands: over consecutive rounds of one pid, round_no minus its own row number stays constant
    SELECT *, round_no - row_number() OVER (PARTITION BY instance, gpu_index, pid ORDER BY round_no) AS island
    FROM listed
)
SELECT instance, gpu_index, pid, min(round_ts) AS first_seen, max(round_ts) AS last_seen
FROM islands
GROUP BY instance, gpu_index, pid, island;
