-- Every run of a scheduled job with a positive duration.
-- Used by oomlab.findings.causes.
SELECT name, start_ts, end_ts, hosts FROM stg_job_occurrences WHERE end_ts > start_ts;
