-- Every source with the instances its rows name and its folder: what load/placement.py places files by.
SELECT s.source_id, s.path, list(DISTINCT i.instance) AS instances
FROM sources AS s
LEFT JOIN (
    SELECT source_id, instance FROM requests
    UNION ALL SELECT source_id, instance FROM oom_events
    UNION ALL SELECT source_id, instance FROM allocator_stats
    UNION ALL SELECT source_id, instance FROM allocator_settings
    UNION ALL SELECT source_id, instance FROM snapshots
) AS i USING (source_id)
GROUP BY ALL
ORDER BY s.source_id;
