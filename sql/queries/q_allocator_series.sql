-- Per instance, GPU and process with at least two allocator moments: the first and last moment's allocated
-- and reserved bytes, the printing resolution, and the moments' sources. A printout that states no sizes (corpus
-- allocator/027: a table whose rows the poster cut) is no moment of the series.
-- Used by oomlab.analyses.fleet.allocator_series.
SELECT instance, gpu_index, process,
       count(DISTINCT allocated_total_bytes) AS moments,  -- a summary and a stats dict of one moment are one
       arg_min(allocated_bytes, seq) AS first_allocated_bytes,
       arg_max(allocated_bytes, seq) AS last_allocated_bytes,
       arg_min(reserved_bytes, seq) AS first_reserved_bytes,
       arg_max(reserved_bytes, seq) AS last_reserved_bytes,
       max(allocated_bytes) AS max_allocated_bytes,
       max(reserved_bytes) AS max_reserved_bytes,
       max(exact_to_bytes) AS exact_to_bytes,
       max(num_ooms) AS num_ooms,
       min(ts) AS first_ts,
       max(ts) AS last_ts,
       list(DISTINCT origin ORDER BY origin) AS origins
FROM fct_allocator_moments
WHERE allocated_bytes IS NOT NULL AND reserved_bytes IS NOT NULL
GROUP BY instance, gpu_index, process
HAVING count(*) >= 2
ORDER BY instance, gpu_index, process;
