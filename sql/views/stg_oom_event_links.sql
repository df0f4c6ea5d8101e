-- oom_event_links as stored: which real OOM each oom_events row is a sighting of (load/reconcile.py), the
-- device that event is on, and how the sighting was linked.
CREATE OR REPLACE VIEW stg_oom_event_links AS
SELECT * FROM oom_event_links;
