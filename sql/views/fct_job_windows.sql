-- The windows of every scheduled job per instance, overlapping runs merged. A run's hosts are selectors
-- (exact names or shell globs, oomlab_host_matches); NULL hosts means every instance seen in the traffic.
-- Instances the job does not run on get the union of its windows too, with `on_job_host` false: the same
-- times without the job, the control. A job whose selectors match no instance with traffic has no rows: the
-- hosts it runs on are not in the data (or misspelt, and then among the others), so no instance is known to
-- be without it and there is nothing to compare; fct_job_hosts says which selectors matched nothing.
CREATE OR REPLACE VIEW fct_job_windows AS
WITH instances AS (
    SELECT DISTINCT instance FROM fct_traffic_exposure
), per_host AS (
    SELECT o.name, i.instance AS host, o.start_ts, o.end_ts,
           oomlab_host_matches(o.hosts, i.instance) AS listed
    FROM stg_job_occurrences o CROSS JOIN instances i
    WHERE o.end_ts > o.start_ts
), roles AS (
    SELECT name, host, bool_or(listed) AS on_job_host FROM per_host GROUP BY name, host
), tested AS (
    SELECT name FROM roles GROUP BY name HAVING bool_or(on_job_host)
), chosen AS (
    -- a job host keeps the runs listing it; a control host keeps every run
    SELECT p.name, p.host, p.start_ts, p.end_ts, r.on_job_host
    FROM per_host p JOIN roles r USING (name, host) JOIN tested USING (name)
    WHERE p.listed = r.on_job_host OR NOT r.on_job_host
), ordered AS (
    SELECT *, max(end_ts) OVER (PARTITION BY name, host ORDER BY start_ts, end_ts
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS previous_end
    FROM chosen
), islands AS (
    SELECT *, sum(CASE WHEN previous_end IS NULL OR start_ts > previous_end THEN 1 ELSE 0 END)
                  OVER (PARTITION BY name, host ORDER BY start_ts, end_ts) AS island
    FROM ordered
)
SELECT name, host, on_job_host, min(start_ts) AS start_ts, max(end_ts) AS end_ts, count(*) AS runs
FROM islands
GROUP BY name, host, on_job_host, island;
