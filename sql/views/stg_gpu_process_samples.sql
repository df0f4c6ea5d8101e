-- gpu_process_samples placed in time (NULL ts: no time stated and no --at; those stay in the table only), with
-- the device each process ran on: the source's own GPU index where it states one (the nvidia-smi table and
-- -q), else matched to the instance's gpu_samples by GPU UUID or bus id (compute-apps rows, when queried);
-- an instance whose telemetry shows one GPU, or no GPU samples at all, ran them on that one (index 0 when
-- unknown). Processes of a multi-GPU instance that cannot be placed keep a NULL gpu_index.
CREATE OR REPLACE VIEW stg_gpu_process_samples AS
WITH gpus AS (
    SELECT instance, coalesce(gpu_index, 0) AS gpu_index, gpu_uuid, gpu_bus_id
    FROM gpu_samples
    WHERE instance IS NOT NULL
),
by_uuid AS (
    SELECT instance, gpu_uuid, min(gpu_index) AS gpu_index FROM gpus WHERE gpu_uuid IS NOT NULL GROUP BY ALL
),
by_bus AS (
    SELECT instance, gpu_bus_id, min(gpu_index) AS gpu_index FROM gpus WHERE gpu_bus_id IS NOT NULL GROUP BY ALL
),
per_instance AS (
    SELECT instance, min(gpu_index) AS gpu_index, count(DISTINCT gpu_index) AS gpus FROM gpus GROUP BY instance
)
SELECT
    p.* EXCLUDE (gpu_index),
    coalesce(p.gpu_index, u.gpu_index, b.gpu_index,
             CASE WHEN i.instance IS NULL THEN 0 WHEN i.gpus = 1 THEN i.gpu_index END) AS gpu_index
FROM gpu_process_samples AS p
LEFT JOIN by_uuid AS u ON u.instance = p.instance AND u.gpu_uuid = p.gpu_uuid
LEFT JOIN by_bus AS b ON b.instance = p.instance AND b.gpu_bus_id = p.gpu_bus_id
LEFT JOIN per_instance AS i ON i.instance = p.instance
WHERE p.ts IS NOT NULL;
