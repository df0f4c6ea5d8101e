-- Final allocator state per snapshot, device and pool (small / large / private): reserved, allocated, free, largest
-- free block. A snapshot of a process that used several GPUs holds each one's segments; they are separate memory.
CREATE OR REPLACE VIEW fct_snapshot_pools AS
WITH seg AS (
    SELECT snapshot_id, device, pool, count(*) AS segments, sum(total_size)::BIGINT AS reserved_bytes,
           count(*) FILTER (WHERE is_expandable) AS expandable_segments
    FROM stg_segments
    GROUP BY snapshot_id, device, pool
), blk AS (
    SELECT snapshot_id, device, pool,
           coalesce(sum(size) FILTER (WHERE is_allocated), 0)::BIGINT AS allocated_bytes,
           coalesce(sum(size) FILTER (WHERE is_active), 0)::BIGINT AS active_bytes,
           coalesce(sum(requested_size) FILTER (WHERE is_allocated), 0)::BIGINT AS requested_bytes,
           coalesce(sum(size) FILTER (WHERE NOT is_active), 0)::BIGINT AS free_bytes,
           coalesce(max(size) FILTER (WHERE NOT is_active), 0) AS largest_free_block_bytes,
           sum(internal_waste_bytes)::BIGINT AS internal_waste_bytes,
           count(*) FILTER (WHERE is_allocated) AS allocated_blocks,
           count(*) FILTER (WHERE NOT is_active) AS free_blocks
    FROM stg_snapshot_blocks
    GROUP BY snapshot_id, device, pool
)
SELECT
    seg.snapshot_id,
    seg.device,
    seg.pool,
    seg.segments,
    seg.expandable_segments,
    seg.reserved_bytes,
    coalesce(blk.allocated_bytes, 0) AS allocated_bytes,
    coalesce(blk.active_bytes, 0) AS active_bytes,
    seg.reserved_bytes - coalesce(blk.allocated_bytes, 0) AS reserved_unallocated_bytes,
    coalesce(blk.requested_bytes, 0) AS requested_bytes,
    coalesce(blk.free_bytes, 0) AS free_bytes,
    coalesce(blk.largest_free_block_bytes, 0) AS largest_free_block_bytes,
    coalesce(blk.internal_waste_bytes, 0) AS internal_waste_bytes,
    coalesce(blk.allocated_blocks, 0) AS allocated_blocks,
    coalesce(blk.free_blocks, 0) AS free_blocks
FROM seg
LEFT JOIN blk ON blk.snapshot_id = seg.snapshot_id AND blk.device = seg.device AND blk.pool = seg.pool;
