-- The frames of each stack; depth 0 is the innermost frame (the allocating call).
CREATE TABLE IF NOT EXISTS frames (
    snapshot_id INTEGER NOT NULL,
    stack_id INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    filename VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    line BIGINT
);
