-- OOMs and OOM rate per 1,000 requests over all time, by every dimension of fct_traffic_dimensions
-- (`analyses.aggregates.oom_rates` computes the same for a time range). The rate counts only OOMs of
-- instances with a request log; `ooms` counts them all.
CREATE OR REPLACE VIEW rpt_oom_rate_by_dimension AS
SELECT
    dimension, key, key_order,
    sum(requests)::BIGINT AS requests,
    sum(ooms)::BIGINT AS ooms,
    sum(ooms_with_traffic)::BIGINT AS ooms_with_traffic,
    1000.0 * sum(ooms_with_traffic) / nullif(sum(requests), 0) AS oom_rate_per_1k
FROM fct_traffic_dimensions
GROUP BY dimension, key, key_order
ORDER BY dimension, key_order NULLS LAST, key NULLS LAST;
