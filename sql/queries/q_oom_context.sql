-- Every OOM event in [$since, $until) with the context its classification needs.
-- Used by oomlab.analyses.fleet.classify.
SELECT * FROM fct_oom_context
WHERE ($since::TIMESTAMP IS NULL OR ts >= $since::TIMESTAMP)
  AND ($until::TIMESTAMP IS NULL OR ts < $until::TIMESTAMP)
ORDER BY ts, event_id;
