-- One row per allocator segment (a cudaMalloc, or an expandable mapping) in a snapshot's final state.
CREATE TABLE IF NOT EXISTS segments (
    snapshot_id INTEGER NOT NULL,
    segment_id INTEGER NOT NULL,
    device INTEGER NOT NULL,
    address BIGINT NOT NULL,
    total_size BIGINT NOT NULL,
    allocated_size BIGINT NOT NULL,
    active_size BIGINT NOT NULL,
    requested_size BIGINT NOT NULL,
    stream BIGINT NOT NULL,
    segment_type VARCHAR NOT NULL,
    pool_owner BIGINT NOT NULL,
    pool_id BIGINT NOT NULL,
    pool VARCHAR NOT NULL,
    is_expandable BOOLEAN NOT NULL,
    stack_id INTEGER
);
