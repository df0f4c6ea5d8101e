-- Events that change active memory (alloc, and the completed frees), each free matched to the alloc before
-- it at the same address, so a free counts against the site that allocated the block. owner_stack_id
-- falls back to the free's own stack when the alloc is older than the trace (as PyTorch's viewer does).
-- active_delta: the bytes the event adds (alloc) or removes (free); the trace records requested sizes,
-- blocks are whole multiples of BLOCK_ROUNDING_BYTES (oomlab_block_bytes).
CREATE OR REPLACE VIEW fct_snapshot_block_events AS
WITH matched AS (
    SELECT
        snapshot_id, device, seq, action, addr, size, time_us, stack_id,
        max(CASE WHEN action = 'alloc' THEN seq END) OVER w AS alloc_seq,
        last_value(CASE WHEN action = 'alloc' THEN stack_id END IGNORE NULLS) OVER w AS alloc_stack_id,
        last_value(CASE WHEN action = 'alloc' THEN time_us END IGNORE NULLS) OVER w AS alloc_time_us
    FROM stg_trace_events
    WHERE action IN ('alloc', 'free_completed', 'free')
    WINDOW w AS (PARTITION BY snapshot_id, device, addr ORDER BY seq
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT
    snapshot_id, device, seq, action, addr, size, time_us, stack_id,
    alloc_seq, alloc_time_us,
    alloc_seq IS NOT NULL AS alloc_in_trace,
    coalesce(alloc_stack_id, stack_id) AS owner_stack_id,
    CASE WHEN action = 'alloc' THEN oomlab_block_bytes(size)
         ELSE -oomlab_block_bytes(size) END AS active_delta
FROM matched;
