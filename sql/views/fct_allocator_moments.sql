-- The `all`-pool moments of allocator_stats in order per instance and GPU: by time where known, then by
-- PyTorch's cumulative allocated bytes (`Tot Alloc`), which only grow within one process. A moment whose
-- cumulative bytes are below the previous one's starts a new process (`process`, from 1 per instance and
-- GPU): a restart set the counters back to zero. `seq` numbers the moments of one process.
CREATE OR REPLACE VIEW fct_allocator_moments AS
WITH ordered AS (
    SELECT *, lag(allocated_total_bytes) OVER w AS previous_total
    FROM stg_allocator_stats
    WHERE pool = 'all'
    WINDOW w AS (PARTITION BY instance, gpu_index
                 ORDER BY ts NULLS FIRST, allocated_total_bytes, allocations_total, source_id, moment)
), numbered AS (
    SELECT *, 1 + sum(CASE WHEN allocated_total_bytes < previous_total THEN 1 ELSE 0 END)
                  OVER (PARTITION BY instance, gpu_index
                        ORDER BY ts NULLS FIRST, allocated_total_bytes, allocations_total, source_id, moment)
                  ::INTEGER AS process
    FROM ordered
)
SELECT * EXCLUDE (previous_total),
       row_number() OVER (PARTITION BY instance, gpu_index, process
                          ORDER BY ts NULLS FIRST, allocated_total_bytes, allocations_total, source_id, moment) AS seq
FROM numbered;
