-- What `oomlab sources` lists: every ingested file, oldest first, with the device its rows are on where the file
-- names none of its own (`device`) and what placed it (`placed_by`: its rows, its OOMs, its folder, or its name
-- when nothing does and the file's name stands in for a device; source_placements).
CREATE OR REPLACE VIEW rpt_sources AS
SELECT s.source_id, s.path, s.kind, s.rows, s.rejects, s.ingested_at, s.size_bytes, s.content_hash, s.hash_algorithm,
       s.note,
       CASE WHEN p.placed_by = 'its rows' THEN NULL ELSE coalesce(p.instance, s.labels ->> 'instance') END AS device,
       p.placed_by
FROM stg_sources AS s
LEFT JOIN stg_source_placements AS p USING (source_id)
ORDER BY s.source_id;
