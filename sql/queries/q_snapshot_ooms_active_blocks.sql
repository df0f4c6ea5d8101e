-- The active blocks (allocated or awaiting free) of snapshot $snapshot_id on device $device in its final state.
-- Used by oomlab.analyses.snapshot.ooms.
SELECT address, size, is_allocated FROM stg_snapshot_blocks
WHERE snapshot_id = $snapshot_id AND device = $device AND is_active;
