-- The card each device is, as its telemetry names it (nvidia-smi `name`, DCGM `modelName`, `nvidia-smi -q`'s
-- Product Name): the name of its latest sample. Findings name a card by this first and by the catalogue's totals
-- (cards.py) only where telemetry names none. Used by oomlab.analyses.fleet.card_names.
SELECT instance, gpu_index, arg_max(gpu_name, ts) AS gpu_name
FROM stg_gpu_samples
WHERE nullif(trim(gpu_name), '') IS NOT NULL
GROUP BY instance, gpu_index
ORDER BY instance, gpu_index;
