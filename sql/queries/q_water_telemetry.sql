-- Device water levels from telemetry over [$since, $until), per device: what nvidia-smi or DCGM saw used on
-- the card (every process with its CUDA context) over its total. Used by oomlab.analyses.fleet.water_levels, which
-- adds these columns to the request-based levels. Each sample's level holds until the next sample, the window's
-- end or MAX_HOLD_S, as a request's does in oomlab_water_hourly; the steady level is the median over clock hours of
-- the time-weighted level, and the alert levels are ALERT_LEVELS (sql/macros/oomlab_settings.sql).
WITH samples AS (
    SELECT instance, gpu_index, ts, level, memory_total_bytes, memory_free_bytes,
           lead(ts) OVER (PARTITION BY instance, gpu_index ORDER BY ts) AS next_ts
    FROM stg_gpu_samples
    WHERE level IS NOT NULL
      AND ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until)
),
held AS (
    SELECT *,
           greatest(least(epoch(least(coalesce(next_ts, ts), coalesce($until::TIMESTAMP, next_ts, ts)))
                          - epoch(ts), MAX_HOLD_S()), 0) AS hold_s
    FROM samples
),
hours AS (
    SELECT instance, gpu_index, sum(level * hold_s) / nullif(sum(hold_s), 0) AS mean_level
    FROM held
    GROUP BY instance, gpu_index, date_trunc('hour', ts)
),
steady AS (
    SELECT instance, gpu_index, median(mean_level) AS telemetry_steady_level
    FROM hours
    GROUP BY instance, gpu_index
)
SELECT h.instance, h.gpu_index,
       count(*) AS telemetry_samples,
       max(h.memory_total_bytes) AS telemetry_total_bytes,
       sum(h.hold_s) / 3600 AS telemetry_hours_observed,
       coalesce(sum(h.hold_s) FILTER (WHERE h.level >= ALERT_LEVELS()[1]), 0) / 3600 AS telemetry_hours_above_70,
       coalesce(sum(h.hold_s) FILTER (WHERE h.level >= ALERT_LEVELS()[2]), 0) / 3600 AS telemetry_hours_above_85,
       coalesce(sum(h.hold_s) FILTER (WHERE h.level >= ALERT_LEVELS()[3]), 0) / 3600 AS telemetry_hours_above_95,
       any_value(s.telemetry_steady_level) AS telemetry_steady_level,
       max(h.level) AS telemetry_max_level,
       min(h.memory_free_bytes) AS telemetry_min_free_bytes
FROM held AS h
JOIN steady AS s USING (instance, gpu_index)
GROUP BY h.instance, h.gpu_index
ORDER BY h.instance, h.gpu_index;
