-- The time each card and usable capacity was seen in [$since, $until).
-- Used by oomlab.findings.prompt_threshold.
SELECT device_total, capacity_bytes, min(ts) AS first_ts, max(ts) AS last_ts
FROM fct_prompt_requests
WHERE ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until)
GROUP BY ALL;
