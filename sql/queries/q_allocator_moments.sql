-- The allocator's printouts (memory_summary / memory_stats, `all` pool) of one instance, in order, with the
-- file each came from. Used by oomlab.analyses.fleet.allocator_series.
SELECT m.process, m.seq, m.ts, m.gpu_index, m.origin, s.path AS source_file, m.line,
       m.allocated_bytes, m.allocated_peak_bytes, m.reserved_bytes, m.reserved_peak_bytes,
       m.inactive_split_bytes, m.num_ooms, m.num_alloc_retries, m.exact_to_bytes
FROM fct_allocator_moments m
JOIN stg_sources s USING (source_id)
WHERE m.instance = $instance
ORDER BY m.gpu_index, m.process, m.seq;
