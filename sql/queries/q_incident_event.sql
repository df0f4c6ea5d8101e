-- One OOM event with everything its message and request row say (fct_oom_context) plus the verbatim message
-- and the file it came from. Used by oomlab.report.incident_data.
SELECT c.*, o.message, o.framework AS message_framework, s.path AS source_path
FROM fct_oom_context AS c
JOIN stg_oom_events AS o USING (event_id)
LEFT JOIN stg_sources AS s ON s.source_id = o.source_id
WHERE c.event_id = $event_id;
