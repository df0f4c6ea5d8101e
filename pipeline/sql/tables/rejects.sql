-- Everything read but not loaded, with the reason: nothing is dropped silently.
CREATE TABLE IF NOT EXISTS rejects (
    source_id INTEGER NOT NULL,
    line      BIGINT,
    reason    VARCHAR NOT NULL,
    raw       VARCHAR
);
