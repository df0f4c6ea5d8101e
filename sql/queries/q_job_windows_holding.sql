-- Per OOM ($ids / $instances / $ts / $first_seen, one element each; $first_seen: when telemetry first listed its
-- neighbour, NULL when none does): the scheduled jobs whose window on its instance holds it (oomlab_run_holds,
-- the same test the job tests' owners use). One row per OOM and job; an OOM no window holds has none.
-- Used by oomlab.findings.causes.
WITH asked AS (
    SELECT unnest($ids::BIGINT[]) AS id, unnest($instances::VARCHAR[]) AS instance,
           unnest($ts::TIMESTAMP[]) AS ts, unnest($first_seen::TIMESTAMP[]) AS first_seen
)
SELECT DISTINCT a.id, w.name
FROM asked a
JOIN fct_job_windows w
  ON w.on_job_host AND w.host = a.instance AND oomlab_run_holds(a.ts, a.first_seen, w.start_ts, w.end_ts)
ORDER BY a.id, w.name;
