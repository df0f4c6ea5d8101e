-- Hourly water levels per device over [$since, $until) (fractions of the device), for the weekly report's
-- water-level chart. Used by oomlab.report.weekly_data.
SELECT instance, gpu_index, hour, model_version, device_total, requests, ooms,
       held_level, allocated_level, peak_level
FROM fct_water_hourly
WHERE ($since IS NULL OR hour >= $since::TIMESTAMP) AND ($until IS NULL OR hour < $until::TIMESTAMP)
ORDER BY instance, gpu_index, hour;
