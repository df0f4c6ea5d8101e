-- Events after of one snapshot (parameters are positional).
-- Used by oomlab.analyses.snapshot_ooms.
SELECT seq, action, addr, size FROM trace_events
WHERE snapshot_id = ? AND device = ? AND seq >= ? ORDER BY seq DESC;
