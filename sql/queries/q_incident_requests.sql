-- Requests of one instance in [$since, $until) that the incident timeline draws (agg_incident_requests: every
-- request of the minutes around an OOM, elsewhere each minute's first, highest- and lowest-peak request);
-- peak_allocated is allocated_after where the log gives no peak. Used by oomlab.report.incident_data.
SELECT request.*
FROM agg_incident_requests
WHERE instance = $instance
  AND minute >= date_trunc('minute', $since::TIMESTAMP) AND minute < $until::TIMESTAMP
  AND request.ts >= $since::TIMESTAMP AND request.ts < $until::TIMESTAMP
ORDER BY ALL;
