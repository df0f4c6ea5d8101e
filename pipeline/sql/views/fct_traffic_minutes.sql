-- Requests and OOM events per instance and minute (UTC): the grain periodicity and job windows work at.
CREATE OR REPLACE VIEW fct_traffic_minutes AS
SELECT
    instance,
    date_trunc('minute', ts) AS minute,
    bool_or(has_request_log) AS has_request_log,
    count(*) FILTER (WHERE kind = 'request') AS requests,
    count(*) FILTER (WHERE kind = 'oom') AS ooms
FROM fct_traffic_events
GROUP BY instance, minute;
