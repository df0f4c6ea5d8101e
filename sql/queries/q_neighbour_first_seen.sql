-- Per OOM ($instances / $ts / $pids, one element each; $pids: the neighbours' pids, empty or NULL when none is
-- named): when telemetry first listed the neighbour that arrived last, in the stay of it that holds the OOM
-- (fct_gpu_process_stays: a stay of the pid on the instance that began at or before the OOM and was still listed
-- at most NEIGHBOUR_ROUND_MAX_AGE before it). NULL where no telemetry lists any of them. One row per element, in
-- order.
-- Used by oomlab.analyses.fleet.jobs.
WITH asked AS (
    SELECT unnest(range(len($instances::VARCHAR[]))) AS i, unnest($instances::VARCHAR[]) AS instance,
           unnest($ts::TIMESTAMP[]) AS ts, unnest($pids::BIGINT[][]) AS pids
), each_pid AS (
    SELECT i, instance, ts, unnest(coalesce(pids, [])) AS pid FROM asked
)
SELECT a.i, max(s.first_seen) AS first_seen
FROM asked a
LEFT JOIN each_pid p USING (i)
LEFT JOIN fct_gpu_process_stays s
  ON s.instance = p.instance AND s.pid = p.pid
 AND s.first_seen <= p.ts AND p.ts - s.last_seen <= NEIGHBOUR_ROUND_MAX_AGE()
GROUP BY a.i
ORDER BY a.i;
