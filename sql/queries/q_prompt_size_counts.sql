-- Requests and OOMs per card, model version and size in [$since, $until).
-- Used by oomlab.analyses.fleet.prompt_threshold.
SELECT CASE WHEN grouping(batch_x_input) = 0 THEN 'batch_x_input' ELSE 'batch_x_tokens' END AS metric,
       device_total, capacity_bytes, model_version,
       coalesce(batch_x_input, batch_x_tokens) AS size,
       count(*) FILTER (WHERE NOT is_oom) AS oks,
       count(*) FILTER (WHERE is_oom) AS fails
FROM fct_prompt_requests
WHERE excluded_because IS NULL AND ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until)
GROUP BY GROUPING SETS ((device_total, capacity_bytes, model_version, batch_x_input),
                        (device_total, capacity_bytes, model_version, batch_x_tokens));
