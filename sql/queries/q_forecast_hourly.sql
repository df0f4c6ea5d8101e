-- Hourly water levels per device over [$since, $until): what the forecast's trend is fitted on.
-- Used by oomlab.analyses.fleet.forecast (and the weekly report's water chart, which shares the result).
SELECT instance, gpu_index, lifetime, hour, model_version, device_total, requests, ooms,
       held_level, allocated_level, peak_level
FROM fct_water_hourly
-- whole hours inside the window only: a partial hour would mix in requests from outside it
WHERE ($since::TIMESTAMP IS NULL OR hour >= $since)
  AND ($until::TIMESTAMP IS NULL OR hour + INTERVAL 1 HOUR <= $until)
ORDER BY instance, gpu_index, hour;
