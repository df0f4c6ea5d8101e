-- Requests and OOMs per ISO weekday (1 = Monday) and hour of day over [$since, $until): the weekly report's
-- heatmap. Counting rules as fct_traffic_events (a rate counts only OOMs of instances with a request log; requests
-- are counted per minute, so the window cuts at the minute).
-- Used by oomlab.report.weekly_data.
SELECT day_of_week, hour_of_day,
       coalesce(sum(requests), 0)::BIGINT AS requests,
       count(*) FILTER (WHERE kind = 'oom')::BIGINT AS ooms,
       count(*) FILTER (WHERE kind = 'oom' AND has_request_log)::BIGINT AS ooms_with_traffic
FROM fct_traffic_events
WHERE ($since IS NULL OR ts >= $since::TIMESTAMP) AND ($until IS NULL OR ts < $until::TIMESTAMP)
GROUP BY day_of_week, hour_of_day
ORDER BY day_of_week, hour_of_day;
