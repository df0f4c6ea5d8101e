-- Every request with batch and prompt sizes on a known card, as the prompt-threshold analysis weighs it. A request
-- on a raised baseline (allocated_before more than RAISED_BASELINE_BYTES above the lowest of its deployment:
-- instance, GPU and model version, since every lifetime of a version restarts at the same weights) had less room
-- because a leak or resident growth took it. `fresh_x_input` / `fresh_x_tokens` are the sizes as they weigh on a
-- fresh process: on a raised baseline the size plus the rise over what one unit of that size costs (regr_slope of
-- peak_allocated - allocated_before over the version's successful requests), so that a threshold is the same on
-- every request of a leaking version; on a fresh baseline (`at_fresh_baseline`) the sizes themselves.
-- What may leave a request out of a clean threshold model, as flags (fct_prompt_requests names the reason, once the
-- device's capacity is known):
--   cost_unknown       on a raised baseline whose size costs are not known to SIZE_COST_MAX_ERROR (no peaks
--                      logged, or sizes that do not set the memory)
--   names_neighbour    an OOM that shows another process: its message names one, or, naming none, the card had
--                      more in use than this process holds by the request's shortfall (oomlab_unnamed_bytes: ROCm's
--                      messages list no process). Left out where the device's other OOMs do not all show one: an
--                      intermittent neighbour such as a backup; a constant one is in capacity (fct_prompt_capacity)
--   fragmented         an OOM with at least FRAGMENTED_REQUEST_MULTIPLE times the request and FRAGMENTED_CARD_SHARE
--                      of the card reserved but unallocated: the memory was there, in pieces (smaller slack is
--                      normal caching)
-- `sample_key`: a hash of the request's identity, the same on every engine (md5 of its fields as text), by which
-- agg_prompt_sample keeps a deterministic, even sample. Rows without allocated_before cannot be checked for a
-- raised baseline and are kept. Joins to small aggregates only (no windows), so it streams on large fleets.
-- Portable (load/portable.py): the aggregate tier reads it on Spark too.
CREATE OR REPLACE VIEW stg_prompt_requests AS
WITH baselines AS (
    SELECT instance, gpu_index, model_version,
           min(allocated_before) AS deployment_baseline
    FROM stg_requests
    WHERE device_total > 0 AND instance IS NOT NULL
    GROUP BY instance, gpu_index, model_version
),
costs AS (
    -- bytes above the baseline per unit of each size, and the fit to judge the slope by
    SELECT model_version,
           regr_slope(peak_allocated - allocated_before, batch_x_input) AS input_cost,
           regr_r2(peak_allocated - allocated_before, batch_x_input) AS input_r2,
           regr_slope(peak_allocated - allocated_before, batch_x_tokens) AS tokens_cost,
           regr_r2(peak_allocated - allocated_before, batch_x_tokens) AS tokens_r2,
           count(*) AS n
    FROM (
        SELECT model_version, peak_allocated, allocated_before,
               batch_size * input_sequence_length AS batch_x_input,
               batch_size * (input_sequence_length + coalesce(output_sequence_length, 0)) AS batch_x_tokens
        FROM stg_requests
        WHERE NOT is_oom AND peak_allocated IS NOT NULL AND allocated_before IS NOT NULL
          AND batch_size > 0 AND input_sequence_length > 0
    ) AS sized
    GROUP BY model_version
),
usable_costs AS (
    -- a slope's relative standard error is sqrt((1 - r2) / ((n - 2) r2))
    SELECT model_version,
           CASE WHEN input_cost > 0 AND n > 2 AND input_r2 > 0
                     AND sqrt((1 - input_r2) / ((n - 2) * input_r2)) <= SIZE_COST_MAX_ERROR()
                THEN input_cost END AS input_cost,
           CASE WHEN tokens_cost > 0 AND n > 2 AND tokens_r2 > 0
                     AND sqrt((1 - tokens_r2) / ((n - 2) * tokens_r2)) <= SIZE_COST_MAX_ERROR()
                THEN tokens_cost END AS tokens_cost
    FROM costs
),
sized AS (
    -- baselines and costs are a few rows per device and version, the OOM events small beside the requests: joined
    -- by broadcast on Spark, not by a shuffle and sort of every request (load/portable.py makes the comment Spark's
    -- hint)
    SELECT /*+ BROADCAST(b, k, e) */
        r.instance,
        r.gpu_index,
        r.ts,
        r.model_version,
        r.request_id,
        r.is_oom,
        r.device_total,
        r.batch_size,
        r.input_sequence_length,
        coalesce(r.output_sequence_length, 0) AS output_sequence_length,
        r.batch_size * r.input_sequence_length AS batch_x_input,
        r.batch_size * (r.input_sequence_length + coalesce(r.output_sequence_length, 0)) AS batch_x_tokens,
        r.allocated_before,
        b.deployment_baseline,
        greatest(r.allocated_before - b.deployment_baseline, 0) AS baseline_rise_bytes,
        coalesce(r.allocated_before - b.deployment_baseline, 0) <= RAISED_BASELINE_BYTES() AS at_fresh_baseline,
        k.input_cost,
        k.tokens_cost,
        -- a neighbour is named when the message lists a process besides this one: PyTorch prints the "this
        -- process" clause when it finds its own pid among the driver's list; without it (a PID namespace) one
        -- of the listed is this process (stg_oom_sightings), so only a second one is a neighbour. Counted, not
        -- judged by size, so that this per-row reading stays portable to the aggregate tier's engines. Where
        -- none is named, the card's accounting may still show one (oomlab_unnamed_bytes), what this process
        -- holds being its own clause, else the one process listed, else PyTorch's reserve and a context.
        r.is_oom AND CASE
            WHEN coalesce(array_length(e.other_processes), 0)
                 > CASE WHEN e.process_in_use_bytes IS NULL THEN 1 ELSE 0 END THEN true
            ELSE oomlab_unnamed_bytes(
                     e.total_capacity_bytes, e.free_bytes,
                     coalesce(e.process_in_use_bytes,
                              CASE WHEN array_length(e.other_processes) = 1 THEN e.other_processes[1].in_use_bytes END),
                     oomlab_reserved_at_oom(e.reserved_bytes, e.allocated_by_pytorch_bytes,
                                            e.reserved_unallocated_bytes),
                     e.requested_bytes) IS NOT NULL
        END AS names_neighbour,
        coalesce(e.reserved_unallocated_bytes, r.reserved_memory - r.allocator_allocated)
            AS reserved_unallocated_bytes,
        coalesce(e.requested_bytes, r.requested_size) AS requested_bytes,
        md5(concat_ws('|', r.instance, CAST(r.gpu_index AS VARCHAR),
                      CAST(date_diff('microsecond', TIMESTAMP '1970-01-01 00:00:00', r.ts) AS VARCHAR),
                      r.request_id, CAST(r.batch_size AS VARCHAR), CAST(r.input_sequence_length AS VARCHAR)))
            AS sample_key
    FROM stg_requests AS r
    JOIN baselines AS b
        ON b.instance = r.instance AND b.gpu_index = r.gpu_index
       AND b.model_version IS NOT DISTINCT FROM r.model_version
    LEFT JOIN usable_costs AS k ON k.model_version IS NOT DISTINCT FROM r.model_version
    LEFT JOIN oom_events AS e
        ON e.origin = 'structured' AND e.source_id = r.source_id AND e.line = r.line
    WHERE r.device_total > 0 AND r.instance IS NOT NULL
      AND r.batch_size > 0 AND r.input_sequence_length > 0
)
SELECT
    instance, gpu_index, ts, model_version, request_id, is_oom, device_total, batch_size, input_sequence_length,
    output_sequence_length, batch_x_input, batch_x_tokens, allocated_before, deployment_baseline,
    baseline_rise_bytes, at_fresh_baseline,
    CASE WHEN at_fresh_baseline THEN batch_x_input
         ELSE CAST(round(batch_x_input + baseline_rise_bytes / input_cost) AS BIGINT) END AS fresh_x_input,
    CASE WHEN at_fresh_baseline THEN batch_x_tokens
         ELSE CAST(round(batch_x_tokens + baseline_rise_bytes / tokens_cost) AS BIGINT) END AS fresh_x_tokens,
    NOT at_fresh_baseline AND (input_cost IS NULL OR tokens_cost IS NULL) AS cost_unknown,
    names_neighbour,
    coalesce(is_oom AND reserved_unallocated_bytes >= FRAGMENTED_REQUEST_MULTIPLE() * requested_bytes
             AND reserved_unallocated_bytes >= FRAGMENTED_CARD_SHARE() * device_total, false) AS fragmented,
    reserved_unallocated_bytes,
    requested_bytes,
    sample_key
FROM sized;
