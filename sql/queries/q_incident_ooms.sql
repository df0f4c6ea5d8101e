-- Logged OOMs of one instance in [$since, $until) (a snapshot's copy of a failure is left out).
-- Used by oomlab.report.incident_data.
SELECT event_id, ts, origin, requested_bytes, batch_size, input_sequence_length
FROM stg_oom_events
WHERE instance = $instance AND origin <> 'snapshot' AND ts >= $since::TIMESTAMP AND ts < $until::TIMESTAMP
ORDER BY ts, event_id;
