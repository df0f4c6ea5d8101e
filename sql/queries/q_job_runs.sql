-- The runs of every scheduled job within [$since, $until).
-- Used by oomlab.analyses.fleet.jobs.
WITH span AS (
    SELECT name, min(minute) AS first_minute, max(minute) + INTERVAL 1 MINUTE AS end_minute
    FROM fct_job_minutes
    WHERE on_job_host
      AND ($since IS NULL OR minute >= $since::TIMESTAMP) AND ($until IS NULL OR minute < $until::TIMESTAMP)
    GROUP BY name
)
SELECT DISTINCT o.name, o.start_ts, o.end_ts
FROM stg_job_occurrences o JOIN span s USING (name)
WHERE o.end_ts > s.first_minute AND o.start_ts < s.end_minute
ORDER BY o.name, o.start_ts;
