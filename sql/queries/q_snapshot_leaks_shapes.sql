-- The allocated blocks of snapshot $snapshot_id per site, shape (requested size) and call path: 'pool' for a
-- CUDA graph / MemPool private pool, 'load' when a frame of the block's stack matches one of $load_frames
-- (weights moved or loaded, pools reserved at start-up), 'request' when one matches $request_frames (inside a
-- module's forward, generation), else 'unknown'. A mark {file, name} matches a frame of that function whose
-- file name contains `file`. Used by oomlab.analyses.snapshot.leak_evidence.
WITH live AS (
    SELECT site, stack_id, coalesce(requested_size, size) AS shape, size, pool
    FROM stg_snapshot_blocks
    WHERE snapshot_id = $snapshot_id AND is_allocated
),
marks AS (
    SELECT 'load' AS path, m.file AS file, m.name AS name FROM (SELECT unnest($load_frames) AS m)
    UNION ALL
    SELECT 'request' AS path, m.file AS file, m.name AS name FROM (SELECT unnest($request_frames) AS m)
),
stack_paths AS (
    SELECT f.stack_id, bool_or(k.path = 'load') AS on_load, bool_or(k.path = 'request') AS on_request
    FROM stg_frames AS f
    JOIN marks AS k ON f.name = k.name AND contains(f.filename, k.file)
    WHERE f.snapshot_id = $snapshot_id AND f.stack_id IN (SELECT stack_id FROM live)
    GROUP BY f.stack_id
)
SELECT
    l.site,
    l.shape,
    CASE WHEN l.pool = 'private' THEN 'pool'
         WHEN p.on_load THEN 'load'
         WHEN p.on_request THEN 'request'
         ELSE 'unknown' END AS path,
    count(*) AS blocks,
    sum(l.size)::BIGINT AS bytes
FROM live AS l
LEFT JOIN stack_paths AS p ON p.stack_id = l.stack_id
GROUP BY ALL
ORDER BY l.site, l.shape, path;
