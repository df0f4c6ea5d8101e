-- One row per `oom` trace entry of a snapshot: the request that failed and the device's free memory then.
CREATE TABLE IF NOT EXISTS snapshot_ooms (
    snapshot_id INTEGER NOT NULL,
    device INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    time_us BIGINT,
    requested_bytes BIGINT,
    stream BIGINT,
    stack_id INTEGER,
    device_free_bytes BIGINT
);
