-- Which real OOM each oom_events row is a sighting of (docs/schema.md, "One event per real OOM"): rebuilt over
-- the whole database after every ingest (load/reconcile.py), so the order files were ingested in never
-- changes it. `instance` is the device the event was placed on (a sighting whose file named no host takes the
-- host of the sightings it was linked with). A row missing here (a database an earlier version wrote) is an event of its own.
CREATE TABLE IF NOT EXISTS oom_event_links (
    event_id   BIGINT PRIMARY KEY,
    event_key  BIGINT NOT NULL,
    instance   VARCHAR,
    matched_by VARCHAR
);
