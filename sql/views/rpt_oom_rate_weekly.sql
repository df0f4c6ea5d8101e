-- One row per ISO week (Monday 00:00 UTC): requests, OOMs, OOM rate per 1,000 requests (OOMs of instances
-- with a request log over their requests), instances with an OOM, and requests lost (the sequences of the
-- failed batches: a failing batch fails all of them; 1 when the batch size is not known).
CREATE OR REPLACE VIEW rpt_oom_rate_weekly AS
SELECT period_start AS week_start, requests, ooms, ooms_with_traffic, oom_rate_per_1k, instances_affected,
       requests_lost
-- WEEK_ORIGIN is a Monday: seven-day buckets from it are ISO weeks
FROM oomlab_oom_periods(INTERVAL 7 DAY, WEEK_ORIGIN(), NULL::TIMESTAMP, NULL::TIMESTAMP);
