-- ingest --lake: one real row per host and GPU UUID from the lake's compute-apps files ($glob), so that a
-- --query-gpu file without host names finds the host that holds its GPUs (ingest/telemetry._fallback_instance).
-- Never written back: only rows of new sources are.
INSERT INTO gpu_process_samples BY NAME
SELECT COLUMNS(lambda c: c <> 'date') FROM read_parquet($glob, hive_partitioning = true, union_by_name = true)
WHERE gpu_uuid IS NOT NULL AND instance IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY instance, gpu_uuid ORDER BY ts, line) = 1;
