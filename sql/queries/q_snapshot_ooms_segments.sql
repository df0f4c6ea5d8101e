-- The segments of snapshot $snapshot_id on device $device in its final state.
-- Used by oomlab.analyses.snapshot.ooms.
SELECT address, total_size, is_expandable FROM stg_segments WHERE snapshot_id = $snapshot_id AND device = $device;
