-- The time the ingested data covers (requests and OOM events): what recurring jobs are expanded over.
SELECT min(lo), max(hi) FROM (
    SELECT min(ts) AS lo, max(ts) AS hi FROM requests
    UNION ALL
    SELECT min(ts), max(ts) FROM oom_events
);
