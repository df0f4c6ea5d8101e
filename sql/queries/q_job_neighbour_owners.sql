-- Per scheduled job, instance it runs on and neighbour process: how many of the OOMs that neighbour explains
-- there ($instances / $minutes / $labels, one element per OOM) fall inside the job's windows on that instance
-- (the minutes fct_job_minutes counts as inside), and how many it explains there in all: whether the job may be
-- what brings the neighbour. An OOM counts for a job only if its neighbour was first listed ($first_seen, NULL when
-- no telemetry lists it) during the job's window (oomlab_run_holds).
-- Used by oomlab.analyses.fleet.jobs.
WITH hits AS (
    SELECT unnest($instances::VARCHAR[]) AS instance, unnest($minutes::TIMESTAMP[]) AS minute,
           unnest($labels::VARCHAR[]) AS label, unnest($first_seen::TIMESTAMP[]) AS first_seen
), totals AS (
    SELECT instance, label, count(*) AS ooms FROM hits GROUP BY instance, label
), inside AS (
    -- fct_job_windows merges a job's runs per host, so an OOM falls in at most one window of a job
    SELECT w.name, h.instance, h.label, count(*) AS ooms_inside
    FROM hits h
    JOIN fct_job_windows w
      ON w.on_job_host AND w.host = h.instance
     AND oomlab_run_holds(h.minute, h.first_seen, w.start_ts, w.end_ts)
    GROUP BY w.name, h.instance, h.label
)
SELECT i.name, i.instance, i.label, i.ooms_inside, t.ooms
FROM inside i JOIN totals t USING (instance, label)
ORDER BY i.name, i.instance, i.label;
