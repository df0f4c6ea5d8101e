-- The trace events of snapshot $snapshot_id on device $device from sequence number $first_seq on, latest
-- first: what is undone to see the allocator at an earlier OOM. Used by oomlab.analyses.snapshot.ooms.
SELECT seq, action, addr, size FROM stg_trace_events
WHERE snapshot_id = $snapshot_id AND device = $device AND seq >= $first_seq ORDER BY seq DESC;
