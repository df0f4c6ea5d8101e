-- Every run of a scheduled job with a positive duration, once per instance its host selectors match.
-- Used by oomlab.findings.causes.
SELECT o.name, o.start_ts, o.end_ts, i.instance
FROM stg_job_occurrences o JOIN fct_instances i ON oomlab_host_matches(o.hosts, i.instance)
WHERE o.end_ts > o.start_ts;
