-- Daily peak memory per device in [$since, $until): what sizing advice reads.
-- Used by oomlab.analyses.fleet.sizing.
SELECT instance, gpu_index, ts::DATE AS day,
       max(device_total) AS device_total,
       max(peak_level) AS peak_level,
       max(peak_allocated) / max(device_total) AS allocated_peak_level,
       max(peak_bytes) AS peak_bytes,
       max(peak_allocated) AS peak_allocated_bytes,
       count(*) FILTER (WHERE is_oom) AS ooms,
       count(*) AS requests
FROM fct_water_requests
WHERE ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until)
GROUP BY ALL
ORDER BY instance, gpu_index, day;
