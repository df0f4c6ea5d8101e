-- Model stints: runs of consecutive baseline buckets (agg_baseline_buckets) of one model version on one device
-- and process (pid or pod where the log names them). A process that serves several models in turn (a
-- multi-model server that loads and unloads them, or a deploy and its rollback) shows one stint per turn.
-- `level_bytes` is the lowest allocated baseline of the stint: what the loaded model holds while idle.
-- `previous_level_bytes` is the level of the same version's previous stint on the same device and process: a
-- process that freed what it unloaded holds the same bytes for the same model again (the same weights, the same
-- buffers), so a return that holds more carries memory of earlier turns (analyses.fleet.swaps).
CREATE OR REPLACE VIEW fct_model_stints AS
WITH flagged AS (
    SELECT
        *,
        CASE
            WHEN model_version IS DISTINCT FROM lag(model_version) OVER w
                 OR pid IS DISTINCT FROM lag(pid) OVER w
                 OR pod IS DISTINCT FROM lag(pod) OVER w THEN 1
            ELSE 0
        END AS turn
    FROM agg_baseline_buckets
    WHERE model_version IS NOT NULL
    WINDOW w AS (PARTITION BY instance, gpu_index ORDER BY bucket_start, bucket_end, model_version)
), numbered AS (
    SELECT
        *,
        (sum(turn) OVER (
            PARTITION BY instance, gpu_index ORDER BY bucket_start, bucket_end, model_version ROWS UNBOUNDED PRECEDING
        ))::BIGINT AS stint
    FROM flagged
), stints AS (
    SELECT
        instance,
        gpu_index,
        stint,
        any_value(model_version) AS model_version,
        any_value(pid) AS pid,
        any_value(pod) AS pod,
        min(bucket_start) AS stint_start,
        max(bucket_end) AS stint_end,
        sum(requests)::BIGINT AS requests,
        sum(ooms)::BIGINT AS ooms,
        min(baseline_bytes) AS level_bytes
    FROM numbered
    GROUP BY instance, gpu_index, stint
)
SELECT
    *,
    lag(level_bytes) OVER (PARTITION BY instance, gpu_index, model_version, pid, pod ORDER BY stint)
        AS previous_level_bytes
FROM stints;
