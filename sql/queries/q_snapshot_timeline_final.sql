-- Allocated, active and reserved bytes of snapshot $snapshot_id on device $device in its final state: where
-- the timeline's backward replay starts. Used by oomlab.analyses.snapshot.timeline.
SELECT sum(allocated_size)::BIGINT AS allocated_size, sum(active_size)::BIGINT AS active_size,
       sum(total_size)::BIGINT AS total_size
FROM stg_segments WHERE snapshot_id = $snapshot_id AND device = $device;
