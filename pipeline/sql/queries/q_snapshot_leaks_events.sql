-- Events of one snapshot (parameters are positional).
-- Used by oomlab.analyses.snapshot_leaks.
SELECT e.seq, e.time_us, coalesce(k.site, '<no stack>') AS site, e.active_delta AS delta
FROM fct_snapshot_block_events AS e
LEFT JOIN stacks AS k ON k.snapshot_id = e.snapshot_id AND k.stack_id = e.owner_stack_id
WHERE e.snapshot_id = ?;
