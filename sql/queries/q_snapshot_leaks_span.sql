-- How many events of snapshot $snapshot_id change active memory (the rows of q_snapshot_leaks_events) and the
-- range of their time (seq where a trace has no times): the windows of the leak judgement's baseline growth.
-- Used by oomlab.analyses.snapshot.leak_trace.
SELECT count(*), min(coalesce(time_us, seq))::DOUBLE, max(coalesce(time_us, seq))::DOUBLE
FROM stg_trace_events
WHERE snapshot_id = $snapshot_id AND action IN ('alloc', 'free_completed', 'free');
