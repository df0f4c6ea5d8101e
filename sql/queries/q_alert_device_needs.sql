-- Per device: the most memory one successful request added at its peak (`need_bytes` of
-- fct_water_requests), which the headroom alert keeps free with a margin.
-- Used by oomlab.analyses.fleet.alert_rules.
SELECT instance, gpu_index, max(need_bytes) AS largest_need_bytes
FROM fct_water_requests
WHERE NOT is_oom AND need_bytes > 0
GROUP BY instance, gpu_index
ORDER BY instance, gpu_index;
