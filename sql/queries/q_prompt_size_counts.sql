-- Requests and OOMs per size metric, card, model version and bucket of size in the UTC days that start in
-- [$since, $until), sizes as on a fresh process (stg_prompt_requests.fresh_x_*), clean rows only (fct_prompt_sizes).
-- `adjusted`: how many stood on a raised baseline, so were sized up; `max_ok_size` / `min_fail_size`: the exact
-- largest success and smallest failure in the bucket; `own_fail_sizes` with `own_fail_counts`: the failures' own
-- sizes and how many failed at each (one above a threshold fails on a fresh process too).
-- Used by oomlab.analyses.fleet.prompt_threshold.
SELECT metric, device_total, capacity_bytes, model_version, size_bucket AS size,
       CAST(coalesce(sum(requests) FILTER (WHERE NOT is_oom), 0) AS BIGINT) AS oks,
       CAST(coalesce(sum(requests) FILTER (WHERE is_oom), 0) AS BIGINT) AS fails,
       CAST(coalesce(sum(requests) FILTER (WHERE NOT at_fresh_baseline), 0) AS BIGINT) AS adjusted,
       max(max_size) FILTER (WHERE NOT is_oom) AS max_ok_size,
       min(min_size) FILTER (WHERE is_oom) AS min_fail_size,
       coalesce(list(own_size ORDER BY own_size) FILTER (WHERE is_oom), []) AS own_fail_sizes,
       coalesce(list(requests ORDER BY own_size) FILTER (WHERE is_oom), []) AS own_fail_counts
FROM fct_prompt_sizes
WHERE excluded_because IS NULL
  AND ($since::TIMESTAMP IS NULL OR day >= $since) AND ($until::TIMESTAMP IS NULL OR day < $until)
GROUP BY metric, device_total, capacity_bytes, model_version, size_bucket;
