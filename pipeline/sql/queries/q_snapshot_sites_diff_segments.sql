-- Diff segments of one snapshot (parameters are positional).
-- Used by oomlab.analyses.snapshot_sites.
SELECT 'removed' AS change, address, total_size, pool, stream FROM segments AS s
WHERE snapshot_id = ? AND NOT EXISTS (
    SELECT 1 FROM segments AS o
    WHERE o.snapshot_id = ? AND o.address = s.address AND o.total_size = s.total_size)
UNION ALL
SELECT 'added' AS change, address, total_size, pool, stream FROM segments AS s
WHERE snapshot_id = ? AND NOT EXISTS (
    SELECT 1 FROM segments AS o
    WHERE o.snapshot_id = ? AND o.address = s.address AND o.total_size = s.total_size)
ORDER BY change, address;
