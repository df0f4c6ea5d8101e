-- OOM events a time window cannot hold: those without a time (findings over --since/--until leave them out and
-- say how many), and those with one known only from a snapshot's trace (with the untimed, all a database may hold
-- when no week can be reported).
-- Used by oomlab.api and oomlab.report.weekly_data.
SELECT count(*) FILTER (WHERE ts IS NULL) AS untimed,
       count(*) FILTER (WHERE ts IS NOT NULL AND origin = 'snapshot') AS in_snapshots
FROM stg_oom_events;
