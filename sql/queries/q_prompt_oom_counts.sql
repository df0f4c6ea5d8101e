-- OOMs per card, usable capacity, model version, size metric and the failure's own size, in the UTC days that start
-- in [$since, $until): every OOM, clean or not (what a cap at a threshold would have refused).
-- Used by oomlab.findings.prompt_threshold.
SELECT device_total, capacity_bytes, model_version, metric, own_size, CAST(sum(requests) AS BIGINT) AS ooms
FROM fct_prompt_sizes
WHERE is_oom AND ($since::TIMESTAMP IS NULL OR day >= $since) AND ($until::TIMESTAMP IS NULL OR day < $until)
GROUP BY device_total, capacity_bytes, model_version, metric, own_size;
