-- OOMs and OOM rate per 1,000 requests for one dimension of fct_traffic_dimensions ($by) over [$since, $until).
-- Used by oomlab.analyses.fleet.aggregates.
SELECT key, key_order,
       sum(requests)::BIGINT AS requests,
       sum(ooms)::BIGINT AS ooms,
       sum(ooms_with_traffic)::BIGINT AS ooms_with_traffic,
       1000.0 * sum(ooms_with_traffic) / nullif(sum(requests), 0) AS oom_rate_per_1k
FROM fct_traffic_dimensions
WHERE dimension = $by
  AND ($since IS NULL OR ts >= $since::TIMESTAMP) AND ($until IS NULL OR ts < $until::TIMESTAMP)
GROUP BY key, key_order
ORDER BY key_order NULLS LAST, key NULLS LAST;
