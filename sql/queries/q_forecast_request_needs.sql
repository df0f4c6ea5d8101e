-- Per device, the memory the requests of the last week needed above their baseline: what a rising level would no longer fit.
-- Used by oomlab.analyses.fleet.forecast.
WITH windowed AS (
    SELECT instance, gpu_index, ts, need_bytes FROM fct_water_requests WHERE ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until)
),
ends AS (SELECT instance, gpu_index, max(ts) AS last_ts FROM windowed GROUP BY ALL)
SELECT instance, gpu_index,
       count(*) * 86400 / greatest(epoch(max(ts)) - epoch(min(ts)), MIN_RATE_SPAN_S()) AS requests_per_day,
       quantile_disc(need_bytes, $probabilities) AS needs
FROM windowed JOIN ends USING (instance, gpu_index)
WHERE ts > last_ts - to_days(RECENT_NEEDS_DAYS())
GROUP BY ALL;
