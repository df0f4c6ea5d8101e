-- Per instance and minute: requests, OOMs and `exposure`, the traffic an OOM count is compared against.
-- Instances with a request log: exposure = their requests. Instances known only from text-log OOMs have no
-- counted requests; their exposure is the fleet's traffic profile (requests per minute of the logged
-- instances, divided by their number), from the day of their first OOM to the end of the day of their last
-- (`traffic_source` = 'fleet_profile'). Tests compare shares of one instance's exposure, so only its shape
-- over time matters, not its scale.
CREATE OR REPLACE VIEW fct_traffic_exposure AS
WITH m AS (
    SELECT * FROM fct_traffic_minutes
), fleet AS (
    SELECT minute, sum(requests)::DOUBLE / (SELECT count(DISTINCT instance) FROM agg_request_devices) AS per_instance
    FROM m WHERE has_request_log GROUP BY minute
), unlogged AS (
    SELECT instance, date_trunc('day', min(minute)) AS first_day,
           date_trunc('day', max(minute)) + INTERVAL 1 DAY AS end_day
    FROM m WHERE NOT has_request_log GROUP BY instance
), profile AS (
    SELECT u.instance, f.minute, f.per_instance
    FROM unlogged u JOIN fleet f ON f.minute >= u.first_day AND f.minute < u.end_day
), unlogged_ooms AS (
    SELECT instance, minute, ooms FROM m WHERE NOT has_request_log
)
SELECT instance, minute, requests, ooms, requests::DOUBLE AS exposure, 'requests' AS traffic_source
FROM m WHERE has_request_log
UNION ALL
SELECT coalesce(p.instance, o.instance), coalesce(p.minute, o.minute), 0, coalesce(o.ooms, 0),
       coalesce(p.per_instance, 0.0), 'fleet_profile'
FROM profile p FULL JOIN unlogged_ooms o ON o.instance = p.instance AND o.minute = p.minute;
