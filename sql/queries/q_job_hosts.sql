-- Per scheduled job: its host selectors as written (none: every host), the instances they match and the
-- selectors that match no instance.
-- Used by oomlab.analyses.fleet.jobs.
SELECT name,
       coalesce(list(DISTINCT selector ORDER BY selector) FILTER (WHERE selector IS NOT NULL), [])
           AS selectors,
       coalesce(list(DISTINCT instance ORDER BY instance) FILTER (WHERE instance IS NOT NULL), [])
           AS hosts_matched,
       coalesce(list(DISTINCT selector ORDER BY selector) FILTER (WHERE instance IS NULL), [])
           AS unmatched_selectors
FROM fct_job_hosts
GROUP BY name
ORDER BY name;
