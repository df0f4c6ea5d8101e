-- gpu_samples as the analyses read them: the device index defaults to 0 (a source that names no GPU saw one),
-- the card's total is derived where the source states only used and free (DCGM's default fields: used + free
-- + reserved), free where it states only used and total, and `level` is used / total: what the driver sees
-- held on the card, by every process with its context.
CREATE OR REPLACE VIEW stg_gpu_samples AS
WITH derived AS (
    SELECT
        * REPLACE (coalesce(gpu_index, 0) AS gpu_index),
        coalesce(memory_total_bytes,
                 memory_used_bytes + memory_free_bytes + coalesce(memory_reserved_bytes, 0)) AS total_bytes
    FROM gpu_samples
    WHERE instance IS NOT NULL
)
SELECT
    * EXCLUDE (total_bytes) REPLACE (
        total_bytes AS memory_total_bytes,
        coalesce(memory_free_bytes,
                 total_bytes - memory_used_bytes - coalesce(memory_reserved_bytes, 0)) AS memory_free_bytes),
    memory_used_bytes / nullif(total_bytes, 0) AS level
FROM derived;
