-- What the driver saw on the instance's GPUs in [$since, $until) (nvidia-smi / DCGM samples): memory held by
-- every process with its context. Used by oomlab.report.incident_data.
SELECT ts, gpu_index, memory_used_bytes, memory_total_bytes
FROM stg_gpu_samples
WHERE instance = $instance AND ts >= $since::TIMESTAMP AND ts < $until::TIMESTAMP
  AND ($gpu_index IS NULL OR gpu_index = $gpu_index)
ORDER BY ts, gpu_index;
