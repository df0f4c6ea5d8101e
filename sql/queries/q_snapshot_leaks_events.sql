-- The events of snapshot $snapshot_id that change active memory, each with the site that allocated its block
-- and the bytes it adds (alloc) or removes (free). Used by oomlab.analyses.snapshot.leaks.
SELECT e.seq, e.time_us, coalesce(k.site, '<no stack>') AS site, e.active_delta AS delta
FROM fct_snapshot_block_events AS e
LEFT JOIN stg_stacks AS k ON k.snapshot_id = e.snapshot_id AND k.stack_id = e.owner_stack_id
WHERE e.snapshot_id = $snapshot_id;
