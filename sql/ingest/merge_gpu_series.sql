-- Series rows (staged as new_gpu_series) into gpu_samples without a second copy of any sample: a row whose GPU,
-- MIG instance, pod and moment gpu_samples already holds (a range pulled again, the same answer ingested twice,
-- another metric of the same moment pulled later) fills only the columns that row lacks; the others are added.
-- The key is parse/telemetry/series_rows.py's GPU_KEY and ts, NULL equal to NULL (a sample without a pod is one sample).
UPDATE gpu_samples AS g SET
    memory_used_bytes = coalesce(g.memory_used_bytes, n.memory_used_bytes),
    memory_free_bytes = coalesce(g.memory_free_bytes, n.memory_free_bytes),
    memory_total_bytes = coalesce(g.memory_total_bytes, n.memory_total_bytes),
    memory_reserved_bytes = coalesce(g.memory_reserved_bytes, n.memory_reserved_bytes),
    utilization_gpu = coalesce(g.utilization_gpu, n.utilization_gpu),
    utilization_memory = coalesce(g.utilization_memory, n.utilization_memory),
    temperature = coalesce(g.temperature, n.temperature),
    power_w = coalesce(g.power_w, n.power_w)
FROM new_gpu_series AS n
WHERE g.origin = n.origin AND g.ts = n.ts
  AND g.instance IS NOT DISTINCT FROM n.instance AND g.gpu_index IS NOT DISTINCT FROM n.gpu_index
  AND g.gpu_uuid IS NOT DISTINCT FROM n.gpu_uuid AND g.mig_instance_id IS NOT DISTINCT FROM n.mig_instance_id
  AND g.pod IS NOT DISTINCT FROM n.pod AND g.namespace IS NOT DISTINCT FROM n.namespace
  AND g.container IS NOT DISTINCT FROM n.container;
