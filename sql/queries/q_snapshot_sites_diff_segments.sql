-- Segments (by address and size) of snapshot $before_id missing from $after_id ('removed') and the other way
-- round ('added'). Used by oomlab.analyses.snapshot.sites.
SELECT 'removed' AS change, address, total_size, pool, stream FROM stg_segments AS s
WHERE snapshot_id = $before_id AND NOT EXISTS (
    SELECT 1 FROM stg_segments AS o
    WHERE o.snapshot_id = $after_id AND o.address = s.address AND o.total_size = s.total_size)
UNION ALL
SELECT 'added' AS change, address, total_size, pool, stream FROM stg_segments AS s
WHERE snapshot_id = $after_id AND NOT EXISTS (
    SELECT 1 FROM stg_segments AS o
    WHERE o.snapshot_id = $before_id AND o.address = s.address AND o.total_size = s.total_size)
ORDER BY change, address;
