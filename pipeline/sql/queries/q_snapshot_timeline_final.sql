-- Final of one snapshot (parameters are positional).
-- Used by oomlab.analyses.snapshot_timeline.
SELECT sum(allocated_size)::BIGINT AS allocated_size, sum(active_size)::BIGINT AS active_size,
       sum(total_size)::BIGINT AS total_size
FROM segments WHERE snapshot_id = ? AND device = ?;
