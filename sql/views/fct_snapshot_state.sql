-- Final allocator state per snapshot: totals, fragmentation, internal waste. Fragmentation is 1 - largest free block /
-- total free on one device; a multi-GPU process's devices are separate memory (fct_snapshot_devices), each with a
-- largest block of its own, so over several it is 1 - the sum of each device's largest free block / total free.
CREATE OR REPLACE VIEW fct_snapshot_state AS
WITH pools AS (
    SELECT snapshot_id,
           sum(free_bytes)::BIGINT AS free_bytes,
           max(largest_free_block_bytes) AS largest_free_block_bytes,
           sum(largest_free_block_bytes)::BIGINT AS largest_per_device_bytes,
           sum(internal_waste_bytes)::BIGINT AS internal_waste_bytes,
           sum(small_reserved_bytes)::BIGINT AS small_reserved_bytes,
           sum(large_reserved_bytes)::BIGINT AS large_reserved_bytes,
           sum(private_reserved_bytes)::BIGINT AS private_reserved_bytes
    FROM fct_snapshot_devices
    GROUP BY snapshot_id
)
SELECT
    s.snapshot_id,
    s.allocated_bytes,
    s.active_bytes,
    s.reserved_bytes,
    s.reserved_bytes - s.allocated_bytes AS reserved_unallocated_bytes,
    s.requested_bytes,
    coalesce(p.free_bytes, 0) AS free_bytes,
    coalesce(p.largest_free_block_bytes, 0) AS largest_free_block_bytes,
    CASE WHEN coalesce(p.free_bytes, 0) = 0 THEN 0.0
         ELSE 1.0 - p.largest_per_device_bytes / p.free_bytes END AS fragmentation,
    coalesce(p.internal_waste_bytes, 0) AS internal_waste_bytes,
    coalesce(p.small_reserved_bytes, 0) AS small_reserved_bytes,
    coalesce(p.large_reserved_bytes, 0) AS large_reserved_bytes,
    coalesce(p.private_reserved_bytes, 0) AS private_reserved_bytes,
    s.segment_count,
    s.block_count,
    s.expandable_segments,
    s.trace_event_count,
    s.oom_count,
    s.first_time_us,
    s.last_time_us
FROM stg_snapshots AS s
LEFT JOIN pools AS p ON p.snapshot_id = s.snapshot_id;
