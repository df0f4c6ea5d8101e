-- The non-PyTorch memory (CUDA context) per device, from its OOM messages.
-- Used by oomlab.analyses.fleet.sizing.
SELECT instance, coalesce(gpu_index, 0) AS gpu_index,
       -- "this process has" less what PyTorch reserved (logged, or allocated + reserved-unallocated)
       median(process_in_use_bytes - held)::BIGINT AS context_bytes
FROM (SELECT *, oomlab_reserved_at_oom(reserved_bytes, allocated_by_pytorch_bytes, reserved_unallocated_bytes) AS held
      FROM stg_oom_events)
WHERE process_in_use_bytes > held AND ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until)
GROUP BY ALL;
