-- Every source with the instances its rows name and its folder: what load/placement.py places files by. Telemetry
-- names hosts too (a DCGM scrape's `Hostname`, a Prometheus answer's `instance`): such a file is on its rows' hosts.
SELECT s.source_id, s.path, list(DISTINCT i.instance) AS instances
FROM sources AS s
LEFT JOIN (
    SELECT source_id, instance FROM requests
    UNION ALL SELECT source_id, instance FROM oom_events
    UNION ALL SELECT source_id, instance FROM allocator_stats
    UNION ALL SELECT source_id, instance FROM allocator_settings
    UNION ALL SELECT source_id, instance FROM text_requests
    UNION ALL SELECT source_id, instance FROM snapshots
    UNION ALL SELECT source_id, instance FROM gpu_samples
    UNION ALL SELECT source_id, instance FROM gpu_process_samples
    UNION ALL SELECT source_id, instance FROM engine_samples
    UNION ALL SELECT source_id, instance FROM engine_memory
) AS i USING (source_id)
GROUP BY ALL
ORDER BY s.source_id;
