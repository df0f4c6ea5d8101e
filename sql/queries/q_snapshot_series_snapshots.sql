-- The snapshots $snapshot_ids with what orders and labels them: the instance, the last trace time, the totals.
-- Used by oomlab.analyses.snapshot.series.
SELECT snapshot_id, path, instance, first_time_us, last_time_us, allocated_bytes, reserved_bytes
FROM stg_snapshots
WHERE list_contains($snapshot_ids::INTEGER[], snapshot_id);
