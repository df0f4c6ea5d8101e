-- The trace events of snapshot $snapshot_id on device $device, in trace order: what its timeline is replayed
-- from. Used by oomlab.analyses.snapshot.timeline.
SELECT seq, time_us, action::VARCHAR AS action, size
FROM stg_trace_events
WHERE snapshot_id = $snapshot_id AND device = $device
ORDER BY seq;
