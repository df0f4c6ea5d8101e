-- Traffic exposure and OOMs per instance and minute over [$since, $until): what hour-of-day tests count.
-- Used by oomlab.analyses.fleet.periodicity.
SELECT instance, minute, requests, ooms, exposure, traffic_source
FROM fct_traffic_exposure
WHERE ($since IS NULL OR minute >= $since::TIMESTAMP) AND ($until IS NULL OR minute < $until::TIMESTAMP);
