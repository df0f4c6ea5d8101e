-- Site stacks of one snapshot (parameters are positional).
-- Used by oomlab.analyses.snapshot_sites.
WITH live AS (
    SELECT stack_id, sum(size)::BIGINT AS live_bytes, count(*) AS live_blocks
    FROM stg_snapshot_blocks WHERE snapshot_id = ? AND site = ? AND is_allocated
    GROUP BY stack_id
)
SELECT l.stack_id, l.live_bytes, l.live_blocks, f.depth, f.filename, f.name, f.line
FROM live AS l
JOIN frames AS f ON f.snapshot_id = ? AND f.stack_id = l.stack_id
ORDER BY l.live_bytes DESC, l.stack_id, f.depth;
