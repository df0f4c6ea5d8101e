-- Every scheduled job's merged windows per instance, with the instance's role (fct_job_windows).
-- Used by oomlab.analyses.fleet.jobs.
SELECT name, host, on_job_host, start_ts, end_ts FROM fct_job_windows ORDER BY name, host, start_ts;
