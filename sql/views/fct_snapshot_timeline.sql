-- Allocated, active and reserved bytes after every trace event, replayed BACKWARDS from the final state
-- (as PyTorch's viewer does): the ring buffer may have wrapped, so the state at its start is unknown.
-- value after event i = final value - (sum of all deltas - running sum of deltas up to i).
-- Block events carry the requested size; it is rounded up to the allocator's 512-byte block granularity
-- so that the curve meets memory_allocated() (block sizes) at the final state. The timeline analysis
-- (analyses/snapshot/timeline.py) computes the same numbers in polars, faster; a test checks they agree.
CREATE OR REPLACE VIEW fct_snapshot_timeline AS
WITH deltas AS (
    SELECT
        snapshot_id, device, seq, time_us, action, size,
        CASE WHEN action = 'alloc' THEN oomlab_block_bytes(size)
             WHEN action IN ('free_requested', 'free') THEN -oomlab_block_bytes(size) ELSE 0 END AS d_allocated,
        CASE WHEN action = 'alloc' THEN oomlab_block_bytes(size)
             WHEN action IN ('free_completed', 'free') THEN -oomlab_block_bytes(size) ELSE 0 END AS d_active,
        CASE WHEN action IN ('segment_alloc', 'segment_map') THEN size
             WHEN action IN ('segment_free', 'segment_unmap') THEN -size ELSE 0 END AS d_reserved
    FROM stg_trace_events
), totals AS (
    SELECT snapshot_id, device,
           sum(d_allocated) AS all_allocated, sum(d_active) AS all_active, sum(d_reserved) AS all_reserved
    FROM deltas
    GROUP BY snapshot_id, device
), final AS (
    SELECT snapshot_id, device,
           sum(total_size) AS reserved_bytes, sum(allocated_size) AS allocated_bytes, sum(active_size) AS active_bytes
    FROM stg_segments
    GROUP BY snapshot_id, device
), running AS (
    SELECT
        d.snapshot_id, d.device, d.seq, d.time_us, d.action, d.size,
        sum(d_allocated) OVER run AS run_allocated,
        sum(d_active) OVER run AS run_active,
        sum(d_reserved) OVER run AS run_reserved
    FROM deltas AS d
    WINDOW run AS (PARTITION BY snapshot_id, device ORDER BY seq ROWS UNBOUNDED PRECEDING)
)
SELECT
    r.snapshot_id,
    r.device,
    r.seq,
    r.time_us,
    r.action,
    r.size,
    (coalesce(f.allocated_bytes, 0) - (t.all_allocated - r.run_allocated))::BIGINT AS allocated_bytes,
    (coalesce(f.active_bytes, 0) - (t.all_active - r.run_active))::BIGINT AS active_bytes,
    (coalesce(f.reserved_bytes, 0) - (t.all_reserved - r.run_reserved))::BIGINT AS reserved_bytes,
    r.action = 'oom' AS is_oom
FROM running AS r
JOIN totals AS t ON t.snapshot_id = r.snapshot_id AND t.device = r.device
LEFT JOIN final AS f ON f.snapshot_id = r.snapshot_id AND f.device = r.device;
