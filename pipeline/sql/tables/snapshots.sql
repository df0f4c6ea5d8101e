CREATE SEQUENCE IF NOT EXISTS snapshot_ids START 1;
-- One row per memory snapshot file: its labels, allocator settings, totals and trace time range.
CREATE TABLE IF NOT EXISTS snapshots (
    snapshot_id INTEGER PRIMARY KEY,
    source_id INTEGER,
    path VARCHAR NOT NULL,
    instance VARCHAR,
    model_version VARCHAR,
    tags JSON,
    format VARCHAR NOT NULL,
    legacy_shapes VARCHAR[],
    device INTEGER,
    devices INTEGER[],
    allocator_settings JSON,
    alloc_conf VARCHAR,
    expandable_segments BOOLEAN NOT NULL,
    first_time_us BIGINT,
    last_time_us BIGINT,
    segment_count INTEGER NOT NULL,
    block_count INTEGER NOT NULL,
    trace_event_count BIGINT NOT NULL,
    oom_count INTEGER NOT NULL,
    stack_count INTEGER NOT NULL,
    allocated_bytes BIGINT NOT NULL,
    active_bytes BIGINT NOT NULL,
    reserved_bytes BIGINT NOT NULL,
    requested_bytes BIGINT NOT NULL,
    external_annotations JSON
);
