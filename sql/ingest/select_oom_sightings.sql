-- Every OOM sighting with what load/oom_links.py links sightings of one real OOM by: where and when it was
-- seen, its sizes, the request's latency (a request-log row is stamped once per request, the failure falls
-- anywhere inside it) and the source's path (an instance that only repeats the name ingest gives the file places
-- nothing), the OOM message where the linking reads it (a request-log row's, whose numbers another file's copy
-- of it prints; a document's, $document_suffixes, whose copies of one pasted failure are one), and the pid of the
-- listed process that is this one (stg_oom_sightings: seen through a PID namespace, the host's pid, as
-- nvidia-smi on that host lists it), and the framework whose message it is (one failure is one allocator's).
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
    CASE WHEN o.origin = 'structured'
              OR list_bool_or([ends_with(lower(s.path), x) FOR x IN $document_suffixes::VARCHAR[]])
         THEN o.message END AS message,
    o.self_pid,
    o.framework
FROM stg_oom_sightings AS o
JOIN sources AS s USING (source_id)
LEFT JOIN requests AS r ON o.origin = 'structured' AND r.source_id = o.source_id AND r.line = o.line
ORDER BY o.event_id;
