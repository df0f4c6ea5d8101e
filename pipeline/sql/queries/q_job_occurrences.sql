-- Every run of a scheduled job with a positive duration.
-- Used by oomlab.analyses.cause_findings.
SELECT name, start_ts, end_ts, hosts FROM job_occurrences WHERE end_ts > start_ts;
