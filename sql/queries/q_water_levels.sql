-- Time above 70 / 85 / 95 % per device over [$since, $until).
-- Used by oomlab.analyses.fleet.water_levels.
-- Its hourly rows (one per device and clock hour, with the alert) come from the macro oomlab_water_hourly.
SELECT instance, gpu_index,
       max(device_total) AS device_total,
       sum(requests)::BIGINT AS requests,
       sum(ooms)::BIGINT AS ooms,
       min(first_ts) AS first_ts,
       max(last_ts) AS last_ts,
       sum(hold_s) / 3600 AS hours_observed,
       sum(hold_above_70) / 3600 AS hours_above_70,
       sum(peaks_above_70) / sum(requests) AS requests_peak_above_70,
       sum(hold_above_85) / 3600 AS hours_above_85,
       sum(peaks_above_85) / sum(requests) AS requests_peak_above_85,
       sum(hold_above_95) / 3600 AS hours_above_95,
       sum(peaks_above_95) / sum(requests) AS requests_peak_above_95,
       -- the median hour: time-weighted, as every clock hour counts once whatever its traffic
       median(mean_held_level) AS steady_level,
       max(max_held_level) AS max_held_level,
       max(peak_level) AS peak_level,
       max(peak_allocated_bytes) AS peak_allocated_bytes,
       max(peak_reserved_bytes) AS peak_reserved_bytes,
       max(peak_bytes) AS peak_bytes,
       coalesce(sum(hold_s) FILTER (WHERE alert), 0) / 3600 AS alert_hours,
       count(*) FILTER (WHERE alert_starts) AS alert_episodes
FROM oomlab_water_hourly($since::TIMESTAMP, $until::TIMESTAMP) AS alerts
GROUP BY instance, gpu_index
ORDER BY instance, gpu_index;
