-- The aggregate tier (docs/spark.md): what the analyses need of the request logs, computed by DuckDB on a database
-- or from a lake by `oomlab aggregate --engine duckdb|spark`, and bounded by instances x minutes, not by requests.
-- Per instance, GPU, model version and minute (UTC): the requests, how many of them ended in out-of-memory, and
-- the first and last request's time. Periodicity, job windows, OOM rates by time and traffic exposure work at this
-- grain. Written in the part of DuckDB's dialect sqlglot carries to Spark (load/portable.py): no `* REPLACE`, no
-- list functions, no DuckDB-only hash.
CREATE OR REPLACE VIEW agg_request_minutes AS
SELECT
    instance,
    gpu_index,
    model_version,
    date_trunc('minute', ts) AS minute,
    count(*) AS requests,
    count(*) FILTER (WHERE is_oom) AS oom_requests,
    min(ts) AS first_ts,
    max(ts) AS last_ts
FROM stg_requests
GROUP BY instance, gpu_index, model_version, date_trunc('minute', ts);
