-- Minutes inside the windows of scheduled jobs, per job and instance: what a reported job already explains.
-- Used by oomlab.analyses.fleet.periodicity.
SELECT DISTINCT name, instance, minute FROM fct_job_minutes
WHERE inside AND on_job_host AND list_contains($names, name)
  AND ($since IS NULL OR minute >= $since::TIMESTAMP) AND ($until IS NULL OR minute < $until::TIMESTAMP);
