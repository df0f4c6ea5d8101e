-- Requests and OOM events per instance and minute (UTC): the grain periodicity and job windows work at. Requests
-- come from the aggregate tier (agg_request_minutes); OOMs from oom_events, as in fct_traffic_events (origins
-- `structured` and `message`, not `snapshot`, and only those with a time). `has_request_log`: the instance has
-- rows in `requests`, so its OOMs have a traffic denominator.
CREATE OR REPLACE VIEW fct_traffic_minutes AS
WITH served AS (
    SELECT instance, minute, CAST(sum(requests) AS BIGINT) AS requests
    FROM agg_request_minutes
    GROUP BY instance, minute
), ooms AS (
    SELECT instance, date_trunc('minute', ts) AS minute, count(*) AS ooms
    FROM stg_oom_events
    WHERE origin <> 'snapshot' AND ts IS NOT NULL
    GROUP BY instance, date_trunc('minute', ts)
), logged AS (
    SELECT DISTINCT instance FROM agg_request_minutes
)
SELECT
    coalesce(s.instance, o.instance) AS instance,
    coalesce(s.minute, o.minute) AS minute,
    s.requests IS NOT NULL OR coalesce(o.instance IN (SELECT instance FROM logged), false) AS has_request_log,
    coalesce(s.requests, 0) AS requests,
    coalesce(o.ooms, 0) AS ooms
FROM served AS s
FULL OUTER JOIN ooms AS o ON o.instance IS NOT DISTINCT FROM s.instance AND o.minute = s.minute;
