-- Requests, OOMs, rate, instances affected and requests lost per period of $width from $origin.
-- Used by oomlab.analyses.aggregates.
SELECT time_bucket($width, ts, $origin::TIMESTAMP) AS period_start,
       time_bucket($width, ts, $origin::TIMESTAMP) + $width AS period_end,
       count(*) FILTER (WHERE kind = 'request') AS requests,
       count(*) FILTER (WHERE kind = 'oom') AS ooms,
       count(*) FILTER (WHERE kind = 'oom' AND has_request_log) AS ooms_with_traffic,
       1000.0 * count(*) FILTER (WHERE kind = 'oom' AND has_request_log)
           / nullif(count(*) FILTER (WHERE kind = 'request'), 0) AS oom_rate_per_1k,
       count(DISTINCT instance) FILTER (WHERE kind = 'oom') AS instances_affected,
       coalesce(sum(coalesce(batch_size, 1)) FILTER (WHERE kind = 'oom'), 0)::BIGINT AS requests_lost
FROM fct_traffic_events
WHERE ($since IS NULL OR ts >= $since::TIMESTAMP) AND ($until IS NULL OR ts < $until::TIMESTAMP)
GROUP BY ALL
ORDER BY period_start;
