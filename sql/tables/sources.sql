-- One row per ingested file; rows/rejects count what it contributed.
CREATE SEQUENCE IF NOT EXISTS source_ids START 1;
CREATE TABLE IF NOT EXISTS sources (
    source_id   INTEGER PRIMARY KEY,
    path        VARCHAR NOT NULL,
    content_hash VARCHAR NOT NULL,
    kind        VARCHAR NOT NULL,
    ingested_at TIMESTAMP NOT NULL,
    rows        BIGINT NOT NULL,
    rejects     BIGINT NOT NULL,
    size_bytes  BIGINT,
    labels      JSON
);
-- Why a file yielded no row and no reject ("nothing found: ..."); NULL when it yielded facts.
ALTER TABLE sources ADD COLUMN IF NOT EXISTS note VARCHAR;
-- What content_hash is a digest of: xxh3-128 (parse/facts.HASH_ALGORITHM); databases written before hold sha256
-- (the column was `sha256`; load.sql renames it), which ingest still compares against.
ALTER TABLE sources ADD COLUMN IF NOT EXISTS hash_algorithm VARCHAR DEFAULT 'sha256';
