-- How many clean requests on a fresh baseline (what q_prompt_clean_requests samples) there are in [$since, $until).
-- Used by oomlab.analyses.fleet.prompt_risk.
SELECT count(*) FROM fct_prompt_requests WHERE excluded_because IS NULL AND at_fresh_baseline AND ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until);
