-- Every OOM sighting with what load/oom_links.py links sightings of one real OOM by: where and when it was
-- seen, its sizes, the request's latency (a request-log row is stamped once per request, the failure falls
-- anywhere inside it) and the source's path (an instance that only repeats the name ingest gives the file places
-- nothing) and the OOM message (for a request-log row, the one it logged: the numbers another file's copy of it
-- prints; in a document, copies of one pasted failure), and the pid of the listed process that is this one (stg_oom_sightings: seen through a PID
-- namespace, the host's pid, as nvidia-smi on that host lists it).
SELECT
    o.event_id,
    o.source_id,
    s.path,
    coalesce(o.line, 0) AS line,
    o.origin,
    o.ts,
    o.instance,
    o.gpu_index,
    o.requested_bytes,
    o.free_bytes,
    o.total_capacity_bytes,
    r.latency_ms,
    o.message,
    o.self_pid
FROM stg_oom_sightings AS o
JOIN sources AS s USING (source_id)
LEFT JOIN requests AS r ON o.origin = 'structured' AND r.source_id = o.source_id AND r.line = o.line
ORDER BY o.event_id;
