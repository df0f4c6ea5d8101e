-- The aggregate tier (see agg_request_minutes): the requests of stg_prompt_requests counted per device, model
-- version, card, UTC day, size metric (`batch_x_input`, `batch_x_tokens`) and bucket of size as on a fresh process
-- (oomlab_fine_bucket: 128 per doubling, under 0.8 % wide, below the 1 % within which sizes at a boundary go either
-- way), with the flags that may leave them out of a clean model. `min_size` / `max_size` are the exact sizes at
-- the bucket's ends, so that a threshold's largest success and smallest failure stay the requests' own; `own_size`
-- is a failure's size before any baseline adjustment (NULL for successes: failures are few, so keeping their sizes
-- exact costs a row per OOM at most). Bounded by devices x days x buckets, not by the requests.
CREATE OR REPLACE VIEW agg_prompt_sizes AS
WITH sized AS (
    -- one pass over the requests, a row per metric (a UNION ALL of two selects would weigh every request twice)
    SELECT r.instance, r.gpu_index, r.model_version, r.device_total, CAST(r.ts AS DATE) AS day, r.ts, r.is_oom,
           r.at_fresh_baseline, r.cost_unknown, r.names_neighbour, r.fragmented, m.metric,
           CASE m.metric WHEN 'batch_x_input' THEN r.fresh_x_input ELSE r.fresh_x_tokens END AS size,
           CASE m.metric WHEN 'batch_x_input' THEN r.batch_x_input ELSE r.batch_x_tokens END AS own_size
    FROM stg_prompt_requests AS r
    CROSS JOIN (VALUES ('batch_x_input'), ('batch_x_tokens')) AS m(metric)
), guessed AS (
    -- the fine bucket a step a column (oomlab_pow2_guess): inline it is twenty logarithms a row
    SELECT *, oomlab_pow2_guess(size) AS size_guess FROM sized
), settled AS (
    SELECT *, oomlab_pow2_settle(size, size_guess) AS size_pow2 FROM guessed
), bucketed AS (
    SELECT *, oomlab_fine_of_pow2(size, size_pow2) AS size_bucket, CASE WHEN is_oom THEN own_size END AS oom_size
    FROM settled
)
SELECT instance, gpu_index, model_version, device_total, day, metric, is_oom, at_fresh_baseline, cost_unknown,
       names_neighbour, fragmented, size_bucket, oom_size AS own_size,
       count(*) AS requests, min(size) AS min_size, max(size) AS max_size, min(ts) AS first_ts, max(ts) AS last_ts
FROM bucketed
GROUP BY instance, gpu_index, model_version, device_total, day, metric, is_oom, at_fresh_baseline, cost_unknown,
         names_neighbour, fragmented, size_bucket, oom_size;
