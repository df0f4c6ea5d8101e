-- OOMs per card and usable capacity in [$since, $until).
-- Used by oomlab.findings.prompt_threshold.
SELECT device_total, capacity_bytes, model_version, batch_x_input, batch_x_tokens
FROM fct_prompt_requests
WHERE is_oom AND ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until);
