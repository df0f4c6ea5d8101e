-- Active blocks of one snapshot (parameters are positional).
-- Used by oomlab.analyses.snapshot_ooms.
SELECT address, size, is_allocated FROM stg_snapshot_blocks
WHERE snapshot_id = ? AND device = ? AND is_active;
