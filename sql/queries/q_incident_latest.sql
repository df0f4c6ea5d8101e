-- The latest OOM in the database (one with a time before those without; logged OOMs before a snapshot's copy of
-- the same failure; ties: the higher event id), for an incident report asked for without --event or --instance.
-- Used by oomlab.report.incident_data.
SELECT event_id
FROM stg_oom_events
ORDER BY ts DESC NULLS LAST, origin = 'snapshot', event_id DESC
LIMIT 1;
