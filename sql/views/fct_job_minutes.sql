-- Every minute of fct_traffic_exposure against every scheduled job: `inside` when the minute lies in one of
-- the job's windows on that instance (control instances: in any of its windows); `on_job_host` when the
-- job runs on the instance. Minute resolution: cron windows start on whole minutes, so their counts are
-- exact; a calendar window with seconds counts the minutes it starts and ends in as inside.
-- A control instance's minutes when it runs another job are left out: it is then no control (the control
-- is "the same times without the job", not with another one).
CREATE OR REPLACE VIEW fct_job_minutes AS
WITH roles AS (
    SELECT DISTINCT name, host, on_job_host FROM fct_job_windows
), window_minutes AS (
    -- an equality join on the minutes of each window; windows are merged, so no minute repeats
    SELECT name, host, on_job_host,
           unnest(range(date_trunc('minute', start_ts), end_ts, INTERVAL 1 MINUTE)) AS minute
    FROM fct_job_windows
), busy AS (
    -- the jobs each instance runs in each minute
    SELECT host, minute, list(DISTINCT name) AS jobs FROM window_minutes WHERE on_job_host GROUP BY host, minute
)
SELECT r.name, x.instance, x.minute, r.on_job_host, w.minute IS NOT NULL AS inside,
       x.requests, x.ooms, x.exposure, x.traffic_source
FROM fct_traffic_exposure x
JOIN roles r ON r.host = x.instance
LEFT JOIN window_minutes w ON w.name = r.name AND w.host = x.instance AND w.minute = x.minute
LEFT JOIN busy b ON b.host = x.instance AND b.minute = x.minute
WHERE r.on_job_host OR b.jobs IS NULL;
