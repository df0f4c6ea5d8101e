-- Final allocator state per snapshot and device: fct_snapshot_state's totals for each GPU the process used. An OOM
-- happens on one device, and a multi-GPU process's other devices are other memory: what would fit, how fragmented
-- the memory is, what the replay shows are that device's (reports/incident).
CREATE OR REPLACE VIEW fct_snapshot_devices AS
WITH pools AS (
    SELECT snapshot_id, device,
           sum(segments)::BIGINT AS segment_count,
           sum(reserved_bytes)::BIGINT AS reserved_bytes,
           sum(allocated_bytes)::BIGINT AS allocated_bytes,
           sum(active_bytes)::BIGINT AS active_bytes,
           sum(requested_bytes)::BIGINT AS requested_bytes,
           sum(free_bytes)::BIGINT AS free_bytes,
           max(largest_free_block_bytes) AS largest_free_block_bytes,
           sum(internal_waste_bytes)::BIGINT AS internal_waste_bytes,
           sum(reserved_bytes) FILTER (WHERE pool = 'small')::BIGINT AS small_reserved_bytes,
           sum(reserved_bytes) FILTER (WHERE pool = 'large')::BIGINT AS large_reserved_bytes,
           sum(reserved_bytes) FILTER (WHERE pool = 'private')::BIGINT AS private_reserved_bytes
    FROM fct_snapshot_pools
    GROUP BY snapshot_id, device
), blocks AS (
    SELECT snapshot_id, device, count(*) AS block_count FROM stg_snapshot_blocks GROUP BY snapshot_id, device
)
SELECT
    p.snapshot_id,
    p.device,
    p.allocated_bytes,
    p.active_bytes,
    p.reserved_bytes,
    p.reserved_bytes - p.allocated_bytes AS reserved_unallocated_bytes,
    p.requested_bytes,
    p.free_bytes,
    p.largest_free_block_bytes,
    CASE WHEN p.free_bytes = 0 THEN 0.0 ELSE 1.0 - p.largest_free_block_bytes / p.free_bytes END AS fragmentation,
    p.internal_waste_bytes,
    coalesce(p.small_reserved_bytes, 0) AS small_reserved_bytes,
    coalesce(p.large_reserved_bytes, 0) AS large_reserved_bytes,
    coalesce(p.private_reserved_bytes, 0) AS private_reserved_bytes,
    p.segment_count,
    coalesce(b.block_count, 0) AS block_count
FROM pools AS p
LEFT JOIN blocks AS b USING (snapshot_id, device);
