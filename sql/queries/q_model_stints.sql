-- The model stints of every device that served two or more model versions and overlaps [$since, $until).
-- Used by oomlab.analyses.fleet.swaps.
SELECT * FROM fct_model_stints
WHERE (instance, gpu_index) IN (
    SELECT (instance, gpu_index) FROM fct_model_stints
    GROUP BY instance, gpu_index
    HAVING count(DISTINCT model_version) >= 2
       AND ($since::TIMESTAMP IS NULL OR max(stint_end) >= $since::TIMESTAMP)
       AND ($until::TIMESTAMP IS NULL OR min(stint_start) < $until::TIMESTAMP)
)
ORDER BY instance, gpu_index, stint;
