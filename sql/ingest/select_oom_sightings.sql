-- Every OOM sighting with what load/reconcile.py links sightings of one real OOM by: where and when it was
-- seen, its sizes, the request's latency (a request-log row is stamped once per request, the failure falls
-- anywhere inside it) and the source's path and label (an instance that only repeats the file's name places
-- nothing).
SELECT
    o.event_id,
    o.source_id,
    s.path,
    s.labels ->> 'instance' AS label_instance,
    coalesce(o.line, 0) AS line,
    o.origin,
    o.ts,
    o.instance,
    o.gpu_index,
    o.requested_bytes,
    o.free_bytes,
    o.total_capacity_bytes,
    r.latency_ms
FROM oom_events AS o
JOIN sources AS s USING (source_id)
LEFT JOIN requests AS r ON o.origin = 'structured' AND r.source_id = o.source_id AND r.line = o.line
ORDER BY o.event_id;
