-- The event an oom_events row is a sighting of (stg_oom_events keys each real OOM by one of its sightings), so
-- that `--event` takes any row's id. Used by oomlab.report.incident_data.
SELECT coalesce((SELECT event_key FROM stg_oom_event_links WHERE event_id = $event_id), $event_id);
