-- One row per ingested file; rows/rejects count what it contributed. `fingerprint` (xxh3-128 of the bytes
-- as stored) tells a file whose content was ingested before; databases that named it `sha256` are renamed
-- on connect (load.py).
CREATE SEQUENCE IF NOT EXISTS source_ids START 1;
CREATE TABLE IF NOT EXISTS sources (
    source_id   INTEGER PRIMARY KEY,
    path        VARCHAR NOT NULL,
    fingerprint VARCHAR NOT NULL,
    kind        VARCHAR NOT NULL,
    ingested_at TIMESTAMP NOT NULL,
    rows        BIGINT NOT NULL,
    rejects     BIGINT NOT NULL,
    size_bytes  BIGINT,
    labels      JSON
);
