-- Per allocation site of snapshot $snapshot_id: the service's own frame that led to it (`caller`, file:function:
-- line). The site names the innermost frame outside plumbing, often inside a library (transformers'
-- cache_utils.py); the fix is in the code that called it. That is the innermost Python frame of the site's
-- largest live stack that belongs to no installed package (site-packages, dist-packages), not to PyTorch or the
-- standard library (lib/pythonX.Y) and not to Python's own frozen modules. NULL when the stack has none.
-- `stack`: that largest stack's frames (file:function:line), innermost first, for a reader to follow by hand.
-- Used by oomlab.analyses.snapshot.leak_evidence.
WITH live AS (
    SELECT site, stack_id, sum(size) AS bytes
    FROM stg_snapshot_blocks
    WHERE snapshot_id = $snapshot_id AND is_allocated
    GROUP BY ALL
),
largest AS (
    SELECT site, arg_max(stack_id, bytes) AS stack_id FROM live GROUP BY site
),
own AS (
    SELECT f.stack_id, arg_min(f.filename || ':' || f.name || ':' || f.line, f.depth) AS caller
    FROM stg_frames AS f
    WHERE f.snapshot_id = $snapshot_id
      AND f.stack_id IN (SELECT stack_id FROM largest)
      AND f.filename LIKE '%.py'
      AND NOT starts_with(f.filename, '<')
      AND NOT regexp_matches(f.filename, '(site|dist)-packages/|/torch/|/lib/python3\.[0-9]+/')
    GROUP BY f.stack_id
),
frames AS (
    SELECT f.stack_id, list(f.filename || ':' || f.name || ':' || f.line ORDER BY f.depth) AS stack
    FROM stg_frames AS f
    WHERE f.snapshot_id = $snapshot_id AND f.stack_id IN (SELECT stack_id FROM largest)
    GROUP BY f.stack_id
)
SELECT l.site, o.caller, fr.stack
FROM largest AS l
LEFT JOIN own AS o USING (stack_id)
LEFT JOIN frames AS fr USING (stack_id)
ORDER BY l.site;
