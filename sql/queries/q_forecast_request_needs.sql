-- Per device, the requests of its last RECENT_NEEDS_DAYS in [$since, $until) (the UTC days from the one holding its
-- last request less that many days, counted in whole days): their rate per day, and their needs above the baseline
-- at the $probabilities, nearest rank as quantile_disc takes them, from the distribution kept per day in
-- agg_need_days (each quantile is the largest need of its bucket: at most 0.8 % above the request's own). What a
-- rising level would no longer fit. The window takes whole days here (a day counts when it starts inside it).
-- Used by oomlab.analyses.fleet.forecast.
WITH windowed AS (
    SELECT * FROM agg_water_hours
    WHERE ($since::TIMESTAMP IS NULL OR hour >= $since) AND ($until::TIMESTAMP IS NULL OR hour < $until)
), ends AS (
    SELECT instance, gpu_index, max(last_ts) AS last_ts FROM windowed GROUP BY ALL
), recent AS (
    SELECT w.instance, w.gpu_index, w.hour, w.requests, w.first_ts, w.last_ts
    FROM windowed AS w JOIN ends AS e USING (instance, gpu_index)
    WHERE w.hour >= CAST(e.last_ts - to_days(RECENT_NEEDS_DAYS()) AS DATE)
), rates AS (
    SELECT instance, gpu_index,
           sum(requests) * 86400 / greatest(epoch(max(last_ts)) - epoch(min(first_ts)), MIN_RATE_SPAN_S())
               AS requests_per_day
    FROM recent
    GROUP BY ALL
), distribution AS (
    SELECT instance, gpu_index, need_bucket, max(h.need_bytes) AS need_bytes,
           sum(sum(h.requests)) OVER (PARTITION BY instance, gpu_index ORDER BY need_bucket
                                      ROWS UNBOUNDED PRECEDING) AS at_or_below,
           -- the ranks count the days' requests, which a window not on whole days can outnumber the hours' by
           sum(sum(h.requests)) OVER (PARTITION BY instance, gpu_index) AS n
    FROM agg_need_days AS h
    JOIN (SELECT DISTINCT instance, gpu_index, CAST(hour AS DATE) AS day FROM recent) AS r
        USING (instance, gpu_index, day)
    WHERE ($since::TIMESTAMP IS NULL OR h.day >= $since) AND ($until::TIMESTAMP IS NULL OR h.day < $until)
    GROUP BY instance, gpu_index, need_bucket
), ranks AS (
    SELECT p, i FROM (SELECT unnest($probabilities::DOUBLE[]) AS p, generate_subscripts($probabilities::DOUBLE[], 1) AS i)
), picked AS (
    SELECT r.instance, r.gpu_index, k.i, min(d.need_bytes) AS need_bytes
    FROM rates AS r CROSS JOIN ranks AS k
    JOIN distribution AS d ON d.instance = r.instance AND d.gpu_index = r.gpu_index AND d.at_or_below >= ceil(d.n * k.p)
    GROUP BY ALL
)
SELECT r.instance, r.gpu_index, r.requests_per_day, list(k.need_bytes ORDER BY k.i) AS needs
FROM rates AS r JOIN picked AS k USING (instance, gpu_index)
GROUP BY r.instance, r.gpu_index, r.requests_per_day;
