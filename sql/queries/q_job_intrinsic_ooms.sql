-- Per scheduled job and instance: how many of the given OOMs (one per element of $instances / $minutes: the
-- instance and minute of each OOM the serving process explains by itself) fall inside and outside the
-- job's windows, over the very minutes fct_job_minutes counts.
-- Used by oomlab.analyses.fleet.jobs.
WITH hits AS (
    SELECT unnest($instances::VARCHAR[]) AS instance, unnest($minutes::TIMESTAMP[]) AS minute
)
SELECT m.name, m.instance,
       count(*) FILTER (WHERE m.inside)::BIGINT AS intrinsic_in,
       count(*) FILTER (WHERE NOT m.inside)::BIGINT AS intrinsic_out
FROM hits h
JOIN fct_job_minutes m ON m.instance = h.instance AND m.minute = h.minute
WHERE ($since IS NULL OR m.minute >= $since::TIMESTAMP) AND ($until IS NULL OR m.minute < $until::TIMESTAMP)
GROUP BY m.name, m.instance;
