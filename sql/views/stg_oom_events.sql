-- oom_events as the fct_ views and queries read them: every event of every origin, as stored (a thin
-- view: the layer that names the table, so that a cleaning rule has one place to go).
CREATE OR REPLACE VIEW stg_oom_events AS
SELECT * FROM oom_events;
