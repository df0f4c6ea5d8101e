-- Per device and clock hour over [since, until) (NULL: open), what q_water_levels and q_water_alert_episodes
-- read. Per request in the window: `hold_s`, the seconds its held level lasted (until the next request, the
-- window's end or MAX_HOLD_S). Per device and clock hour: the time-weighted mean held level, the hold time
-- above each of the ALERT_LEVELS (70 / 85 / 95 %; the columns are named by them), the least free memory after
-- a request, the largest need, and the predictive alert, evaluated hourly as an alert rule would be: the
-- hour's least free memory below ALERT_NEED_FACTOR x the largest peak need of that hour and the hour before.
-- (A sliding one-hour window per request is exact but costs a range-window sort of every request.)
-- Where telemetry covers the hour (stg_gpu_samples), the least free memory is the lower of the two: nvidia-smi
-- or DCGM also see the CUDA context and other processes on the card, which the request log cannot.
CREATE OR REPLACE MACRO oomlab_water_hourly(since, until) AS TABLE
WITH held AS (
SELECT *,
       greatest(least(epoch(least(coalesce(next_ts, ts), coalesce(until, next_ts, ts)))
                      - epoch(ts), MAX_HOLD_S()), 0) AS hold_s
FROM fct_water_requests
WHERE (since IS NULL OR ts >= since) AND (until IS NULL OR ts < until)
),

hours AS (
    SELECT instance, gpu_index, date_trunc('hour', ts) AS hour,
           max(device_total) AS device_total,
           count(*) AS requests,
           count(*) FILTER (WHERE is_oom) AS ooms,
           min(ts) AS first_ts,
           max(ts) AS last_ts,
           sum(hold_s) AS hold_s,
           coalesce(sum(hold_s) FILTER (WHERE held_level >= ALERT_LEVELS()[1]), 0) AS hold_above_70,
           count(*) FILTER (WHERE peak_level >= ALERT_LEVELS()[1]) AS peaks_above_70,
           coalesce(sum(hold_s) FILTER (WHERE held_level >= ALERT_LEVELS()[2]), 0) AS hold_above_85,
           count(*) FILTER (WHERE peak_level >= ALERT_LEVELS()[2]) AS peaks_above_85,
           coalesce(sum(hold_s) FILTER (WHERE held_level >= ALERT_LEVELS()[3]), 0) AS hold_above_95,
           count(*) FILTER (WHERE peak_level >= ALERT_LEVELS()[3]) AS peaks_above_95,
           sum(held_level * hold_s) / nullif(sum(hold_s), 0) AS mean_held_level,
           max(held_level) AS max_held_level,
           max(peak_level) AS peak_level,
           max(peak_allocated) AS peak_allocated_bytes,
           max(reserved_after) AS peak_reserved_bytes,
           max(peak_bytes) AS peak_bytes,
           min(device_total - held_bytes) AS min_free_bytes,
           max(need_bytes) AS need_bytes
    FROM held
    GROUP BY ALL
),
telemetry AS (
    SELECT instance, gpu_index, date_trunc('hour', ts) AS hour, min(memory_free_bytes) AS telemetry_min_free_bytes
    FROM stg_gpu_samples
    WHERE (since IS NULL OR ts >= since) AND (until IS NULL OR ts < until)
      -- a sample using more than its card (an earlier version loaded it) is left out, as stg_gpu_samples
      -- leaves out its level: its free memory is no reading of the card either
      AND NOT coalesce(memory_used_bytes > memory_total_bytes, false)
    GROUP BY ALL
),
measured AS (
    SELECT h.* REPLACE (least(h.min_free_bytes, t.telemetry_min_free_bytes) AS min_free_bytes)
    FROM hours AS h
    LEFT JOIN telemetry AS t USING (instance, gpu_index, hour)
),
alerts AS (
    SELECT *,
           coalesce(min_free_bytes < ALERT_NEED_FACTOR() * recent_need_bytes, false) AS alert,
           -- a new episode: an alerting hour whose previous clock hour did not alert
           coalesce(min_free_bytes < ALERT_NEED_FACTOR() * recent_need_bytes, false)
               AND NOT coalesce(lag(coalesce(min_free_bytes < ALERT_NEED_FACTOR() * recent_need_bytes, false))
                                OVER (PARTITION BY instance, gpu_index ORDER BY hour)
                                AND lag(hour) OVER (PARTITION BY instance, gpu_index ORDER BY hour)
                                    = hour - INTERVAL 1 HOUR, false) AS alert_starts
    FROM (SELECT *, max(need_bytes) OVER (PARTITION BY instance, gpu_index ORDER BY hour
                                          RANGE BETWEEN INTERVAL 1 HOUR PRECEDING AND CURRENT ROW)
                        AS recent_need_bytes
          FROM measured)
)
SELECT * FROM alerts;
