-- Segments of one snapshot (parameters are positional).
-- Used by oomlab.analyses.snapshot_ooms.
SELECT address, total_size, is_expandable FROM segments WHERE snapshot_id = ? AND device = ?;
