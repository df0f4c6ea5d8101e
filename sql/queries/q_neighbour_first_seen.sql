-- Per OOM ($instances / $ts / $pids, one element each; a pid is the largest neighbour's, NULL when none is
-- named): when telemetry first listed that neighbour in the stay that holds the OOM (fct_gpu_process_stays: a
-- stay of the pid on the instance that began at or before the OOM and was still listed at most
-- NEIGHBOUR_ROUND_MAX_AGE before it, the latest such). NULL where no telemetry lists it. One row per element,
-- in order.
-- Used by oomlab.analyses.fleet.jobs.
WITH asked AS (
    SELECT unnest(range(len($instances::VARCHAR[]))) AS i, unnest($instances::VARCHAR[]) AS instance,
           unnest($ts::TIMESTAMP[]) AS ts, unnest($pids::BIGINT[]) AS pid
)
SELECT a.i, max(s.first_seen) AS first_seen
FROM asked a
LEFT JOIN fct_gpu_process_stays s
  ON s.instance = a.instance AND s.pid = a.pid
 AND s.first_seen <= a.ts AND a.ts - s.last_seen <= NEIGHBOUR_ROUND_MAX_AGE()
GROUP BY a.i
ORDER BY a.i;
