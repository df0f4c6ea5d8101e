-- The call stacks holding live blocks at allocation site $site of snapshot $snapshot_id, frame by frame,
-- most live bytes first. Used by oomlab.analyses.snapshot.sites.
WITH live AS (
    SELECT stack_id, sum(size)::BIGINT AS live_bytes, count(*) AS live_blocks
    FROM stg_snapshot_blocks WHERE snapshot_id = $snapshot_id AND site = $site AND is_allocated
    GROUP BY stack_id
)
SELECT l.stack_id, l.live_bytes, l.live_blocks, f.depth, f.filename, f.name, f.line
FROM live AS l
JOIN stg_frames AS f ON f.snapshot_id = $snapshot_id AND f.stack_id = l.stack_id
ORDER BY l.live_bytes DESC, l.stack_id, f.depth;
