-- allocator_stats as the analyses read them: the device index defaults to 0 (a memory_stats() JSON does not
-- name its device; a process that printed one saw one), and moments whose reserved bytes are below their
-- allocated ones are left out: the allocator never hands out more than it holds, so such a row was not
-- printed by it (a hand-edited or mixed-up file).
-- A printout file that names no device of its own is on the one its folder's files are on (source_placements).
CREATE OR REPLACE VIEW stg_allocator_stats AS
SELECT a.* REPLACE (coalesce(a.gpu_index, 0) AS gpu_index, coalesce(p.instance, a.instance) AS instance)
FROM allocator_stats AS a
LEFT JOIN source_placements AS p USING (source_id)
WHERE a.reserved_bytes IS NULL OR a.allocated_bytes IS NULL OR a.reserved_bytes >= a.allocated_bytes;
