-- How many clean requests there are in [$since, $until).
-- Used by oomlab.analyses.fleet.prompt_risk.
SELECT count(*) FROM fct_prompt_requests WHERE excluded_because IS NULL AND ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until);
