-- allocator_stats as the analyses read them: the device index defaults to 0 (a memory_stats() JSON does not
-- name its device; a process that printed one saw one), and moments whose reserved bytes are below their
-- allocated ones are left out: the allocator never hands out more than it holds, so such a row was not
-- printed by it (a hand-edited or mixed-up file).
CREATE OR REPLACE VIEW stg_allocator_stats AS
SELECT * REPLACE (coalesce(gpu_index, 0) AS gpu_index)
FROM allocator_stats
WHERE reserved_bytes IS NULL OR allocated_bytes IS NULL OR reserved_bytes >= allocated_bytes;
