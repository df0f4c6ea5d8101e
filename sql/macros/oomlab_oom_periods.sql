-- Per period of `width` counted from `origin`, over [since, until) (NULL: open): requests, OOMs, OOM rate per
-- 1,000 requests (OOMs of instances with a request log over their requests), instances with an OOM, and
-- requests lost (the sequences of the failed batches: a failing batch fails all of them; 1 when the batch
-- size is not known). Shared by the view rpt_oom_rate_weekly and the query q_oom_periods.
CREATE OR REPLACE MACRO oomlab_oom_periods(width, origin, since, until) AS TABLE
SELECT time_bucket(width, ts, origin) AS period_start,
       time_bucket(width, ts, origin) + width AS period_end,
       coalesce(sum(requests), 0)::BIGINT AS requests,
       count(*) FILTER (WHERE kind = 'oom') AS ooms,
       count(*) FILTER (WHERE kind = 'oom' AND has_request_log) AS ooms_with_traffic,
       1000.0 * count(*) FILTER (WHERE kind = 'oom' AND has_request_log)
           / nullif(sum(requests), 0) AS oom_rate_per_1k,
       count(DISTINCT instance) FILTER (WHERE kind = 'oom') AS instances_affected,
       coalesce(sum(coalesce(batch_size, 1)) FILTER (WHERE kind = 'oom'), 0)::BIGINT AS requests_lost
FROM fct_traffic_events
WHERE (since IS NULL OR ts >= since) AND (until IS NULL OR ts < until)
GROUP BY ALL
ORDER BY period_start;
