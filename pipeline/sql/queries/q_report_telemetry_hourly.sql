-- Hourly highest device level seen by telemetry (nvidia-smi / DCGM: every process with its context, as a
-- fraction of the card) per instance and GPU over [$since, $until). Used by oomlab.report.weekly_data.
SELECT instance, gpu_index, date_trunc('hour', ts) AS hour, max(level) AS device_level
FROM stg_gpu_samples
WHERE ($since IS NULL OR ts >= $since::TIMESTAMP) AND ($until IS NULL OR ts < $until::TIMESTAMP)
GROUP BY ALL
ORDER BY instance, gpu_index, hour;
