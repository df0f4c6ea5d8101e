-- OOMs per device, card, usable capacity, model version, size metric and the failure's own size, in the UTC days
-- that start in [$since, $until): every OOM, clean or not. The device is kept so that the OOMs the classifier gave to
-- another cause can be taken off where they happened. Used by oomlab.findings.prompt_threshold.
SELECT instance, gpu_index, device_total, capacity_bytes, model_version, metric, own_size,
       CAST(sum(requests) AS BIGINT) AS ooms
FROM fct_prompt_sizes
WHERE is_oom AND ($since::TIMESTAMP IS NULL OR day >= $since) AND ($until::TIMESTAMP IS NULL OR day < $until)
GROUP BY instance, gpu_index, device_total, capacity_bytes, model_version, metric, own_size;
