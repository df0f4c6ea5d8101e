-- The windows of every scheduled job per instance, overlapping runs merged. A job with NULL hosts runs on
-- every instance seen in the traffic. Instances the job does not run on get the union of its windows too,
-- with `on_job_host` false: the same times without the job, the control.
CREATE OR REPLACE VIEW fct_job_windows AS
WITH instances AS (
    SELECT DISTINCT instance FROM fct_traffic_exposure
), per_host AS (
    SELECT o.name, i.instance AS host, o.start_ts, o.end_ts,
           (o.hosts IS NULL OR list_contains(o.hosts, i.instance)) AS listed
    FROM stg_job_occurrences o CROSS JOIN instances i
    WHERE o.end_ts > o.start_ts
), roles AS (
    SELECT name, host, bool_or(listed) AS on_job_host FROM per_host GROUP BY name, host
), chosen AS (
    -- a job host keeps the runs listing it; a control host keeps every run
    SELECT p.name, p.host, p.start_ts, p.end_ts, r.on_job_host
    FROM per_host p JOIN roles r USING (name, host)
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
