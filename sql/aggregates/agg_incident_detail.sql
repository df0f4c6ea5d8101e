-- The aggregate tier (see agg_request_minutes): the requests the incident timeline draws one by one
-- (q_incident_requests), whole as a struct: every request of an instance's hour with at most INCIDENT_HOUR_REQUESTS
-- (the chart draws such an hour whole: a short capture, a quiet service), and every request that ended in
-- out-of-memory. Bounded by instances x hours x INCIDENT_HOUR_REQUESTS plus the OOMs; busier hours are drawn from
-- agg_incident_minutes.
CREATE OR REPLACE VIEW agg_incident_detail AS
WITH quiet_hours AS (
    SELECT instance, date_trunc('hour', ts) AS hour
    FROM stg_incident_requests
    GROUP BY instance, date_trunc('hour', ts)
    HAVING count(*) <= INCIDENT_HOUR_REQUESTS()
)
-- quiet_hours is a row per instance and hour: joined by broadcast on Spark (load/portable.py), not by a shuffle
-- and sort of every request
SELECT /*+ BROADCAST(q) */ r.instance, r.minute, r.request
FROM stg_incident_requests AS r
LEFT JOIN quiet_hours AS q ON q.instance = r.instance AND q.hour = date_trunc('hour', r.ts)
WHERE r.is_oom OR q.hour IS NOT NULL;
