-- Requests and OOMs per size metric, card, model version and size in [$since, $until), sizes as on a fresh
-- process (fct_prompt_requests.fresh_x_*). `adjusted`: how many stood on a raised baseline, so were sized
-- up; `own_fail_sizes`: the failures' own sizes (one above a threshold fails on a fresh process too).
-- Used by oomlab.analyses.fleet.prompt_threshold.
WITH clean AS (
    SELECT * FROM fct_prompt_requests
    WHERE excluded_because IS NULL
      AND ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until)
), sized AS (
    SELECT 'batch_x_input' AS metric, device_total, capacity_bytes, model_version, is_oom, at_fresh_baseline,
           fresh_x_input AS size, batch_x_input AS own_size
    FROM clean
    UNION ALL
    SELECT 'batch_x_tokens', device_total, capacity_bytes, model_version, is_oom, at_fresh_baseline,
           fresh_x_tokens, batch_x_tokens
    FROM clean
)
SELECT metric, device_total, capacity_bytes, model_version, size,
       count(*) FILTER (WHERE NOT is_oom) AS oks,
       count(*) FILTER (WHERE is_oom) AS fails,
       count(*) FILTER (WHERE NOT at_fresh_baseline) AS adjusted,
       coalesce(list(own_size) FILTER (WHERE is_oom), []) AS own_fail_sizes
FROM sized
GROUP BY ALL;
