-- snapshots as the snapshot views and queries read them: one row per snapshot file, on the device the file was
-- placed on where it names none of its own (source_placements: the device its OOMs or its folder are on).
CREATE OR REPLACE VIEW stg_snapshots AS
SELECT s.* REPLACE (coalesce(p.instance, s.instance) AS instance)
FROM snapshots AS s
LEFT JOIN source_placements AS p USING (source_id);
