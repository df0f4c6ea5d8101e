-- The `oom` entries of snapshot $snapshot_id's trace, in order. Used by oomlab.analyses.snapshot.ooms.
SELECT seq, device, time_us, requested_bytes, device_free_bytes
FROM stg_snapshot_ooms WHERE snapshot_id = $snapshot_id ORDER BY seq;
