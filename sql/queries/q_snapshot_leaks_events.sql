-- The events of snapshot $snapshot_id that change active memory, in trace order, each with the site that
-- allocated its block, the bytes it adds (alloc) or removes (free), and whether a free's block was allocated
-- before the trace. Used by oomlab.analyses.snapshot.leak_trace.
SELECT e.seq, e.time_us, coalesce(k.site, '<no stack>') AS site, e.active_delta AS delta,
       e.action = 'alloc' AS is_alloc, e.action <> 'alloc' AND NOT e.alloc_in_trace AS frees_older
FROM fct_snapshot_block_events AS e
LEFT JOIN stg_stacks AS k ON k.snapshot_id = e.snapshot_id AND k.stack_id = e.owner_stack_id
WHERE e.snapshot_id = $snapshot_id
ORDER BY e.seq;
