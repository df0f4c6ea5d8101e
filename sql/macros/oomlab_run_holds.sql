-- Does a scheduled job's window [start_ts, end_ts) hold an OOM at `ts` whose neighbour telemetry first listed at
-- `first_seen` (NULL when no telemetry lists it)? The OOM's minute lies in the window, minutes being the job
-- tests' unit (fct_job_minutes counts a window's first, partial minute as inside), and the neighbour arrived during
-- the window: a process listed before the job started is not its doing. The one test of both the job tests'
-- owners (q_job_neighbour_owners) and the findings' attribution (q_job_windows_holding), so the two never
-- disagree at a window's edge.
CREATE OR REPLACE MACRO oomlab_run_holds(ts, first_seen, start_ts, end_ts) AS
    date_trunc('minute', ts) >= date_trunc('minute', start_ts) AND date_trunc('minute', ts) < end_ts
    AND (first_seen IS NULL OR (first_seen >= date_trunc('minute', start_ts) AND first_seen < end_ts));
