-- Daily peak memory per device in [$since, $until) (the hours of agg_water_hours that start in it): what sizing
-- advice reads. Used by oomlab.analyses.fleet.sizing.
SELECT instance, gpu_index, hour::DATE AS day,
       max(device_total) AS device_total,
       max(peak_level) AS peak_level,
       max(peak_allocated_bytes) / max(device_total) AS allocated_peak_level,
       max(peak_bytes) AS peak_bytes,
       max(peak_allocated_bytes) AS peak_allocated_bytes,
       CAST(sum(ooms) AS BIGINT) AS ooms,
       CAST(sum(requests) AS BIGINT) AS requests
FROM agg_water_hours
WHERE ($since::TIMESTAMP IS NULL OR hour >= $since) AND ($until::TIMESTAMP IS NULL OR hour < $until)
GROUP BY ALL
ORDER BY instance, gpu_index, day;
