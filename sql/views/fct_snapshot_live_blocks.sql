-- Allocated blocks of each snapshot's final state with when the trace saw them allocated
-- (the last alloc at their address); alloc_time_us is NULL for blocks older than the trace.
CREATE OR REPLACE VIEW fct_snapshot_live_blocks AS
WITH last_alloc AS (
    SELECT snapshot_id, device, addr, max(seq) AS alloc_seq, arg_max(time_us, seq) AS alloc_time_us
    FROM stg_trace_events
    WHERE action = 'alloc'
    GROUP BY snapshot_id, device, addr
)
SELECT
    b.snapshot_id,
    b.block_id,
    b.device,
    b.address,
    b.size,
    b.requested_size,
    b.stack_id,
    b.site,
    a.alloc_seq,
    a.alloc_time_us,
    a.alloc_seq IS NULL AS before_trace
FROM stg_snapshot_blocks AS b
LEFT JOIN last_alloc AS a
    ON a.snapshot_id = b.snapshot_id AND a.device = b.device AND a.addr = b.address
WHERE b.is_allocated;
