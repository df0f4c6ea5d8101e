-- Trace events with the site of their own stack (for a free: where it was freed) and a timestamp.
CREATE OR REPLACE VIEW stg_snapshot_trace AS
SELECT
    t.snapshot_id,
    t.device,
    t.seq,
    t.action,
    t.addr,
    t.size,
    t.stream,
    t.time_us,
    make_timestamp(t.time_us) AS ts,
    t.stack_id,
    coalesce(k.site, '<no stack>') AS site
FROM trace_events AS t
LEFT JOIN stacks AS k ON k.snapshot_id = t.snapshot_id AND k.stack_id = t.stack_id;
