-- gpu_samples as the analyses read them: samples placed in time (a table or a scrape without a time of its
-- own, ingested without --at, has NULL ts and stays in gpu_samples only), one row per card and moment: the
-- MIG instance rows nvidia-smi prints under the card's own row are parts of it and left out (DCGM states
-- framebuffer fields per instance only, so its instance rows stay). The device index defaults to 0 (a source
-- that names no GPU saw one), the card's total is derived where the source states only used and free
-- (DCGM's default fields: used + free + reserved), free where it states only used and total, and `level` is
-- used / total: what the driver sees held on the card, by every process with its context. Ingest sets aside
-- samples whose used exceeds their total (parse/telemetry/memory.py); a row that still does (loaded by an
-- earlier version) gets no level rather than one capped at 1: a reading above the card is no reading of the
-- card, and capping it would draw a full card nobody saw. The data-quality note counts these rows
-- (q_data_quality).
CREATE OR REPLACE VIEW stg_gpu_samples AS
WITH derived AS (
    SELECT
        * REPLACE (coalesce(gpu_index, 0) AS gpu_index),
        coalesce(memory_total_bytes,
                 memory_used_bytes + memory_free_bytes + coalesce(memory_reserved_bytes, 0)) AS total_bytes
    FROM gpu_samples
    WHERE instance IS NOT NULL AND ts IS NOT NULL
      AND (mig_instance_id IS NULL OR origin <> 'nvidia-smi')
)
SELECT
    * EXCLUDE (total_bytes) REPLACE (
        total_bytes AS memory_total_bytes,
        coalesce(memory_free_bytes,
                 total_bytes - memory_used_bytes - coalesce(memory_reserved_bytes, 0)) AS memory_free_bytes),
    CASE WHEN memory_used_bytes <= total_bytes THEN memory_used_bytes / nullif(total_bytes, 0) END AS level
FROM derived;
