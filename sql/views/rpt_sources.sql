-- What `oomlab sources` lists: every ingested file, oldest first.
CREATE OR REPLACE VIEW rpt_sources AS
SELECT source_id, path, kind, rows, rejects, ingested_at, size_bytes, content_hash, hash_algorithm, note
FROM stg_sources
ORDER BY source_id;
