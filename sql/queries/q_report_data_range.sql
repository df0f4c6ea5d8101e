-- First and last request or OOM time in the database, and the midnight after the last.
-- Used by oomlab.report.weekly_data.
SELECT min(first_ts) AS first_ts, max(last_ts) AS last_ts, date_trunc('day', max(last_ts)) + INTERVAL 1 DAY AS day_end
FROM fct_traffic_events;
