-- The allocator configurations the lines of one request log carry (`alloc_conf`, written by oomlab.capture; the
-- variable's own names are read too), each with the first line and time it appears at per instance. Lines
-- without extra fields are skipped before any JSON is read.
WITH stated AS (
    SELECT instance, ts, line,
           coalesce(extra ->> 'alloc_conf', extra ->> 'PYTORCH_CUDA_ALLOC_CONF', extra ->> 'PYTORCH_ALLOC_CONF')
               AS alloc_conf
    FROM requests
    WHERE source_id = $source_id AND extra IS NOT NULL
)
SELECT instance, alloc_conf, min(line) AS line, min(ts) AS ts
FROM stated
WHERE alloc_conf IS NOT NULL AND trim(alloc_conf) <> ''
GROUP BY instance, alloc_conf
ORDER BY line, instance;
