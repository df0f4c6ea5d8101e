-- The time each card and usable capacity was seen in the UTC days that start in [$since, $until).
-- Used by oomlab.findings.prompt_threshold.
SELECT device_total, capacity_bytes, min(first_ts) AS first_ts, max(last_ts) AS last_ts
FROM fct_prompt_sizes
WHERE ($since::TIMESTAMP IS NULL OR day >= $since) AND ($until::TIMESTAMP IS NULL OR day < $until)
GROUP BY device_total, capacity_bytes;
