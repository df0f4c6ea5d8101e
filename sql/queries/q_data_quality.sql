-- What the data-quality note counts (oomlab.analyses.data_quality), over the whole database: rejects are not
-- placed in time. `handling`: 'set aside' (rejects: read, not loaded), 'flagged' (loaded, implausible:
-- fct_request_flags), 'left out' (loaded by an earlier version with values this one sets aside: no water
-- level is drawn from them) or 'kept' (OOM events whose numbers contradict themselves: counted, their sizes not
-- used as the card's). One row per handling, what and category, and per handling and what a row with a NULL
-- category for the totals: rows, and files they came from.
WITH items AS (
    SELECT
        'set aside' AS handling,
        CASE
            WHEN s.kind IN ('jsonl', 'json', 'csv', 'parquet') THEN 'request rows'
            WHEN s.kind IN ('nvsmi_gpu', 'nvsmi_apps', 'prometheus') THEN 'telemetry samples'
            WHEN s.kind = 'text' THEN 'text log lines'
            WHEN oomlab_is_calendar(s.kind) THEN 'calendar rows'
            ELSE coalesce(s.kind, 'unknown') || ' rows'
        END AS what,
        r.category,
        r.impossible,
        r.source_id,
        1 AS n
    FROM stg_rejects AS r
    LEFT JOIN stg_sources AS s USING (source_id)
    UNION ALL
    SELECT 'flagged', 'request rows', flag, false, source_id, 1
    FROM fct_request_flags
    UNION ALL
    -- counted per file by the aggregate tier (agg_request_sources), not read row by row
    SELECT 'left out', 'request rows', 'impossible values', true, source_id, impossible_rows
    FROM agg_request_sources
    WHERE impossible_rows > 0
    UNION ALL
    SELECT 'left out', 'telemetry samples', 'used above the card', true, source_id, 1
    FROM stg_gpu_samples
    WHERE memory_used_bytes > memory_total_bytes
    UNION ALL
    SELECT 'kept', 'OOM messages', contradiction, true, source_id, 1
    FROM stg_oom_events
    WHERE contradiction IS NOT NULL
)
SELECT
    handling,
    what,
    category,
    bool_or(impossible) AS impossible,
    CAST(sum(n) AS BIGINT) AS rows,
    count(DISTINCT source_id) AS files
FROM items
GROUP BY GROUPING SETS ((handling, what, category), (handling, what))
ORDER BY
    list_position(['set aside', 'left out', 'kept', 'flagged'], handling),
    what,
    category IS NOT NULL,
    rows DESC,
    category;
