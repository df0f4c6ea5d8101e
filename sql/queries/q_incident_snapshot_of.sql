-- The snapshot behind the first of $event_ids (snapshot OOM events that repeat a logged failure).
-- Used by oomlab.report.incident_data.
SELECT snapshot_id FROM stg_oom_events
WHERE list_contains($event_ids::BIGINT[], event_id) AND snapshot_id IS NOT NULL
ORDER BY event_id
LIMIT 1;
