-- Blocks of each snapshot's final state with their segment's pool and their allocation site.
CREATE OR REPLACE VIEW stg_snapshot_blocks AS
SELECT
    b.snapshot_id,
    b.block_id,
    b.segment_id,
    s.device,
    s.stream,
    s.pool,
    s.is_expandable,
    b.address,
    b.offset_bytes,
    b.size,
    b.requested_size,
    b.state,
    b.state = 'active_allocated' AS is_allocated,
    b.state <> 'inactive' AS is_active,
    CASE WHEN b.state = 'active_allocated' THEN b.size - b.requested_size ELSE 0 END AS internal_waste_bytes,
    b.stack_id,
    coalesce(k.site, '<no stack>') AS site
FROM blocks AS b
JOIN segments AS s ON s.snapshot_id = b.snapshot_id AND s.segment_id = b.segment_id
LEFT JOIN stacks AS k ON k.snapshot_id = b.snapshot_id AND k.stack_id = b.stack_id;
