-- Events of one snapshot (parameters are positional).
-- Used by oomlab.analyses.snapshot_timeline.
SELECT seq, time_us, action::VARCHAR AS action, size FROM trace_events WHERE snapshot_id = ? AND device = ?;
