-- One row per block of a segment in a snapshot's final state; blocks tile their segment.
CREATE TABLE IF NOT EXISTS blocks (
    snapshot_id INTEGER NOT NULL,
    block_id INTEGER NOT NULL,
    segment_id INTEGER NOT NULL,
    address BIGINT NOT NULL,
    offset_bytes BIGINT NOT NULL,
    size BIGINT NOT NULL,
    requested_size BIGINT NOT NULL,
    state VARCHAR NOT NULL,
    stack_id INTEGER
);
