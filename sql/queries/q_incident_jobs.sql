-- Scheduled job runs on $instance (its host selectors match it, or it runs on every host) that overlap [$since, $until).
-- Used by oomlab.report.incident_data.
SELECT DISTINCT name, start_ts, end_ts
FROM stg_job_occurrences
WHERE start_ts < $until::TIMESTAMP AND end_ts > $since::TIMESTAMP
  AND oomlab_host_matches(hosts, $instance)
ORDER BY start_ts, name;
