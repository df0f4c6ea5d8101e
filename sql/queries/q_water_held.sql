-- Memory held per device over [$since, $until).
-- Used by oomlab.analyses.water_levels.
-- Per request in the window: `hold_s`, the seconds its held level lasted (until the next request, the
-- window's end or $max_hold_s). Per device and clock hour: the time-weighted mean held level, the hold time
-- above each alert level (70 / 85 / 95 %, the ALERT_LEVELS of oomlab.analyses.water_levels: change both), the
-- least free memory after a request, the largest need, and the predictive alert, evaluated hourly as an alert
-- rule would be: the hour's least free memory below $need_factor x the largest peak need of that hour and the
-- hour before. (A sliding one-hour window per request is exact but costs a range-window sort of every request.)
SELECT *,
       greatest(least(epoch(least(coalesce(next_ts, ts), coalesce($until::TIMESTAMP, next_ts, ts)))
                      - epoch(ts), $max_hold_s), 0) AS hold_s
FROM fct_water_requests
WHERE ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until);
