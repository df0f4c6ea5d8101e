-- The hosts of every scheduled job: each host selector its runs name, as the calendar wrote it (an exact name
-- or a shell glob, oomlab_host_matches), against every instance the database knows (fct_instances), a row
-- per match. A selector that matches no instance keeps one row with instance NULL, so that it can be said.
-- A job with NULL hosts (every host) has selector NULL and a row per instance.
CREATE OR REPLACE VIEW fct_job_hosts AS
WITH selectors AS (
    SELECT DISTINCT name, unnest(hosts) AS selector FROM stg_job_occurrences WHERE hosts IS NOT NULL
), everywhere AS (
    SELECT DISTINCT name FROM stg_job_occurrences WHERE hosts IS NULL
)
SELECT s.name, s.selector, i.instance
FROM selectors s LEFT JOIN fct_instances i ON oomlab_host_matches([s.selector], i.instance)
UNION ALL
SELECT e.name, NULL, i.instance
FROM everywhere e CROSS JOIN fct_instances i;
