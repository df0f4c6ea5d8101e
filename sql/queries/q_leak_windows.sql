-- The windowed allocated-after minima of every process lifetime that overlaps [$since, $until).
-- Used by oomlab.analyses.fleet.leaks.
SELECT * FROM fct_leak_windows
WHERE ($since::TIMESTAMP IS NULL OR window_end >= $since::TIMESTAMP)
  AND ($until::TIMESTAMP IS NULL OR window_start < $until::TIMESTAMP)
ORDER BY instance, gpu_index, lifetime, window_index;
