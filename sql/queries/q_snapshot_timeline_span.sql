-- How many trace events snapshot $snapshot_id has on device $device and the range of their time (seq where a
-- trace has no times): the bins the timeline is downsampled into. Used by oomlab.analyses.snapshot.timeline.
SELECT count(*), min(coalesce(time_us, seq))::DOUBLE, max(coalesce(time_us, seq))::DOUBLE
FROM stg_trace_events
WHERE snapshot_id = $snapshot_id AND device = $device;
