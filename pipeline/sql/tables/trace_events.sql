-- One row per entry of a snapshot's device_traces ring buffer, in recorded order (seq).
CREATE TABLE IF NOT EXISTS trace_events (
    snapshot_id INTEGER NOT NULL,
    device INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    action VARCHAR NOT NULL,
    addr BIGINT,
    size BIGINT,
    stream BIGINT,
    time_us BIGINT,
    stack_id INTEGER
);
