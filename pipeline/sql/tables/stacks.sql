-- One row per distinct call stack of a snapshot (interned once), with its allocation site.
CREATE TABLE IF NOT EXISTS stacks (
    snapshot_id INTEGER NOT NULL,
    stack_id INTEGER NOT NULL,
    frame_count INTEGER NOT NULL,
    site VARCHAR NOT NULL,
    site_filename VARCHAR,
    site_name VARCHAR,
    site_line BIGINT
);
