-- allocator_settings as the analyses read them: one row per option a process stated, as stored.
-- A file that names no device of its own is on the one its OOMs or folder are on (source_placements).
CREATE OR REPLACE VIEW stg_allocator_settings AS
SELECT a.* REPLACE (coalesce(p.instance, a.instance) AS instance)
FROM allocator_settings AS a
LEFT JOIN source_placements AS p USING (source_id);
