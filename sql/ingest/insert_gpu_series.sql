-- The series rows gpu_samples does not hold yet (merge_gpu_series.sql filled the others); returns how many.
INSERT INTO gpu_samples BY NAME
SELECT n.* FROM new_gpu_series AS n
WHERE NOT EXISTS (
    SELECT 1 FROM gpu_samples AS g
    WHERE g.origin = n.origin AND g.ts = n.ts
      AND g.instance IS NOT DISTINCT FROM n.instance AND g.gpu_index IS NOT DISTINCT FROM n.gpu_index
      AND g.gpu_uuid IS NOT DISTINCT FROM n.gpu_uuid AND g.mig_instance_id IS NOT DISTINCT FROM n.mig_instance_id
      AND g.pod IS NOT DISTINCT FROM n.pod AND g.namespace IS NOT DISTINCT FROM n.namespace
      AND g.container IS NOT DISTINCT FROM n.container
);
