-- Engine series rows (staged as new_engine_series) engine_samples does not hold yet: one sample of one series at
-- one moment is kept once however often its range is pulled.
INSERT INTO engine_samples BY NAME
SELECT n.* FROM new_engine_series AS n
WHERE NOT EXISTS (
    SELECT 1 FROM engine_samples AS e
    WHERE e.ts = n.ts AND e.metric = n.metric AND e.labels = n.labels
      AND e.instance IS NOT DISTINCT FROM n.instance
);
