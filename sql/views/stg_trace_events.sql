-- trace_events as the snapshot views and queries read them: each snapshot's device_traces entries in
-- recorded order, as stored (stg_snapshot_trace adds each event's site).
CREATE OR REPLACE VIEW stg_trace_events AS
SELECT * FROM trace_events;
