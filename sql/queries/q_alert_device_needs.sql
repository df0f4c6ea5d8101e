-- Per device: the most memory one successful request added at its peak (`max_ok_need_bytes` of agg_water_hours),
-- which the headroom alert keeps free with a margin.
-- Used by oomlab.analyses.fleet.alert_rules.
SELECT instance, gpu_index, max(max_ok_need_bytes) AS largest_need_bytes
FROM agg_water_hours
WHERE max_ok_need_bytes IS NOT NULL
GROUP BY instance, gpu_index
ORDER BY instance, gpu_index;
