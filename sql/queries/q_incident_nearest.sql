-- The OOM of $instance closest in time to $at (logged OOMs before a snapshot's copy of the same failure;
-- ties: the lower event id). Used by oomlab.report.incident_data.
SELECT event_id
FROM stg_oom_events
WHERE instance = $instance AND ts IS NOT NULL
ORDER BY abs(epoch_us(ts) - epoch_us($at::TIMESTAMP)), origin = 'snapshot', event_id
LIMIT 1;
