-- OOM events a weekly window cannot hold, when no request or logged OOM has a time: those without a time, and
-- those known only from a snapshot's trace. Used by oomlab.report.weekly_data to say why there is no week.
SELECT count(*) FILTER (WHERE ts IS NULL) AS untimed,
       count(*) FILTER (WHERE ts IS NOT NULL AND origin = 'snapshot') AS in_snapshots
FROM stg_oom_events;
