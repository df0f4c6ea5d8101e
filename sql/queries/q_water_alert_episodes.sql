-- Runs of hours whose least free memory is below ALERT_NEED_FACTOR x the largest recent request need:
-- predictive alert episodes.
-- Used by oomlab.analyses.fleet.water_levels.
-- Its hourly rows (one per device and clock hour, with the alert) come from the macro oomlab_water_hourly.
WITH runs AS (
    SELECT *, sum(alert_starts::INTEGER) OVER (PARTITION BY instance, gpu_index ORDER BY hour) AS run
    FROM oomlab_water_hourly($since::TIMESTAMP, $until::TIMESTAMP) AS alerts
)
SELECT instance, gpu_index,
       min(hour) AS start,
       max(hour) + INTERVAL 1 HOUR AS "end",
       sum(requests)::BIGINT AS requests,
       min(min_free_bytes) AS min_free_bytes,
       max(recent_need_bytes) AS largest_need_bytes,
       sum(ooms)::BIGINT AS ooms
FROM runs
WHERE alert
GROUP BY instance, gpu_index, run
ORDER BY instance, gpu_index, start;
