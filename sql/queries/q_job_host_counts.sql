-- Per scheduled job and instance: requests and OOMs inside and outside the job's windows.
-- Used by oomlab.analyses.fleet.jobs.
SELECT name, instance, on_job_host, any_value(traffic_source) AS traffic_source,
       coalesce(sum(requests) FILTER (WHERE inside), 0)::BIGINT AS requests_in,
       coalesce(sum(requests) FILTER (WHERE NOT inside), 0)::BIGINT AS requests_out,
       coalesce(sum(ooms) FILTER (WHERE inside), 0)::BIGINT AS ooms_in,
       coalesce(sum(ooms) FILTER (WHERE NOT inside), 0)::BIGINT AS ooms_out,
       coalesce(sum(exposure) FILTER (WHERE inside), 0.0) AS exposure_in,
       coalesce(sum(exposure) FILTER (WHERE NOT inside), 0.0) AS exposure_out
FROM fct_job_minutes
WHERE ($since IS NULL OR minute >= $since::TIMESTAMP) AND ($until IS NULL OR minute < $until::TIMESTAMP)
GROUP BY name, instance, on_job_host
ORDER BY name, instance;
