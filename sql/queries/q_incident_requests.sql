-- Requests of one instance in [$since, $until) that the incident timeline draws: every request of its quiet hours
-- and every OOM'd one (agg_incident_detail), and of each busier minute the first, highest- and lowest-peak request
-- (agg_incident_minutes), each once; peak_allocated is allocated_after where the log gives no peak. Used by
-- oomlab.report.incident_data.
WITH drawn AS (
    SELECT unnest([first_request, highest_request, lowest_request]) AS request
    FROM agg_incident_minutes
    WHERE instance = $instance
      AND minute >= date_trunc('minute', $since::TIMESTAMP) AND minute < $until::TIMESTAMP
    UNION
    SELECT request
    FROM agg_incident_detail
    WHERE instance = $instance
      AND minute >= date_trunc('minute', $since::TIMESTAMP) AND minute < $until::TIMESTAMP
)
SELECT request.*
FROM drawn
WHERE request.ts >= $since::TIMESTAMP AND request.ts < $until::TIMESTAMP
ORDER BY ALL;
