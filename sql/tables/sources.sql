-- One row per ingested file; rows/rejects count what it contributed.
CREATE SEQUENCE IF NOT EXISTS source_ids START 1;
CREATE TABLE IF NOT EXISTS sources (
    source_id   INTEGER PRIMARY KEY,
    path        VARCHAR NOT NULL,
    sha256      VARCHAR NOT NULL,
    kind        VARCHAR NOT NULL,
    ingested_at TIMESTAMP NOT NULL,
    rows        BIGINT NOT NULL,
    rejects     BIGINT NOT NULL,
    size_bytes  BIGINT,
    labels      JSON
);
-- Why a file yielded no row and no reject ("nothing found: ..."); NULL when it yielded facts.
ALTER TABLE sources ADD COLUMN IF NOT EXISTS note VARCHAR;
