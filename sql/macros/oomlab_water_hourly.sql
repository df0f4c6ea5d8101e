-- Per device and clock hour over [since, until) (NULL: open), what q_water_levels and q_water_alert_episodes
-- read, from the aggregate tier's agg_water_hours (the window takes whole clock hours: an hour counts when it
-- starts inside it). Per request `hold_s`, the seconds its held level lasted (until the next request or
-- MAX_HOLD_S), is summed per hour there; the window's end cuts the hold of the last request before it, so that
-- hour's sums are corrected here with that request's own level and next time. Per device and clock hour: the
-- time-weighted mean held level, the hold time above each of the ALERT_LEVELS (70 / 85 / 95 %; the columns are
-- named by them), the least free memory after a request, the largest need, and the predictive alert, evaluated
-- hourly as an alert rule would be: the hour's least free memory below ALERT_NEED_FACTOR x the largest peak need
-- of that hour and the hour before. (A sliding one-hour window per request is exact but costs a range-window sort
-- of every request.)
-- Where telemetry covers the hour (stg_gpu_samples), the least free memory is the lower of the two: nvidia-smi
-- or DCGM also see the CUDA context and other processes on the card, which the request log cannot.
CREATE OR REPLACE MACRO oomlab_water_hourly(since, until) AS TABLE
WITH windowed AS (
    SELECT *, row_number() OVER (PARTITION BY instance, gpu_index ORDER BY hour DESC) = 1 AS last_hour
    FROM agg_water_hours
    WHERE (since IS NULL OR hour >= since) AND (until IS NULL OR hour < until)
),
cut AS (
    -- how much the window's end shortens the hold of the last request before it (0 or less)
    SELECT *,
           CASE WHEN last_hour AND until IS NOT NULL
                THEN greatest(least(date_diff('microsecond', last_ts, least(coalesce(last_next_ts, last_ts), until))
                                    / 1e6, MAX_HOLD_S()), 0) - last_hold_s
                ELSE 0 END AS hold_cut
    FROM windowed
),

hours AS (
    SELECT instance, gpu_index, hour, device_total, requests, ooms, first_ts, last_ts,
           hold_s + hold_cut AS hold_s,
           hold_above_70 + CASE WHEN last_held_level >= ALERT_LEVELS()[1] THEN hold_cut ELSE 0 END AS hold_above_70,
           peaks_above_70,
           hold_above_85 + CASE WHEN last_held_level >= ALERT_LEVELS()[2] THEN hold_cut ELSE 0 END AS hold_above_85,
           peaks_above_85,
           hold_above_95 + CASE WHEN last_held_level >= ALERT_LEVELS()[3] THEN hold_cut ELSE 0 END AS hold_above_95,
           peaks_above_95,
           (level_hold_s + coalesce(last_held_level, 0) * hold_cut) / nullif(hold_s + hold_cut, 0) AS mean_held_level,
           held_level AS max_held_level,
           peak_level,
           peak_allocated_bytes,
           peak_reserved_bytes,
           peak_bytes,
           min_free_bytes,
           need_bytes
    FROM cut
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
