-- Every request with batch and prompt sizes, its device's usable capacity, and whether it may stand in a
-- clean threshold model. A request on a raised baseline (allocated_before more than 64 MiB above the lowest
-- of its deployment: instance, GPU and model version, since every lifetime of a version restarts at the same
-- weights) had less room because a leak or resident growth took it. `fresh_x_input` / `fresh_x_tokens` are
-- the sizes as they weigh on a fresh process: on a raised baseline the size plus the rise over what one unit
-- of that size costs (regr_slope of peak_allocated - allocated_before over the version's successful
-- requests), so that a threshold is the same on every request of a leaking version; on a fresh baseline
-- (`at_fresh_baseline`) the sizes themselves.
-- Left out (`excluded_because`), since they fail for reasons other than their size:
--   raised_baseline    a raised baseline whose size costs are not known to SIZE_COST_MAX_ERROR (no peaks
--                      logged, or sizes that do not set the memory)
--   neighbour_process  an OOM whose message names another process that the device's other OOMs do not
--                      all name (an intermittent neighbour such as a backup; a constant one is in capacity)
--   fragmentation      an OOM with at least twice the request and 10 % of the card reserved but
--                      unallocated: the memory was there, in pieces (smaller slack is normal caching)
-- Rows without allocated_before cannot be checked for a raised baseline and are kept. Built on `requests`
-- directly with joins to small aggregates (no windows), so it streams on large fleets.
CREATE OR REPLACE VIEW fct_prompt_requests AS
WITH baselines AS (
    SELECT instance, gpu_index, model_version,
           min(allocated_before) AS deployment_baseline
    FROM stg_requests
    WHERE device_total > 0 AND instance IS NOT NULL
    GROUP BY ALL
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
    )
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
rows AS (
    SELECT
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
        coalesce(len(e.other_processes), 0) > 0 AS names_neighbour,
        coalesce(e.reserved_unallocated_bytes, r.reserved_memory - r.allocator_allocated)
            AS reserved_unallocated_bytes,
        coalesce(e.requested_bytes, r.requested_size) AS requested_bytes
    FROM stg_requests AS r
    JOIN baselines AS b
        ON b.instance = r.instance AND b.gpu_index = r.gpu_index
       AND b.model_version IS NOT DISTINCT FROM r.model_version
    LEFT JOIN usable_costs AS k ON k.model_version IS NOT DISTINCT FROM r.model_version
    LEFT JOIN stg_oom_events AS e
        ON e.origin = 'structured' AND e.source_id = r.source_id AND e.line = r.line
    WHERE r.device_total > 0 AND r.instance IS NOT NULL
      AND r.batch_size > 0 AND r.input_sequence_length > 0
)
SELECT
    r.* EXCLUDE (names_neighbour, input_cost, tokens_cost),
    CASE WHEN r.at_fresh_baseline THEN r.batch_x_input
         ELSE round(r.batch_x_input + r.baseline_rise_bytes / r.input_cost)::BIGINT END AS fresh_x_input,
    CASE WHEN r.at_fresh_baseline THEN r.batch_x_tokens
         ELSE round(r.batch_x_tokens + r.baseline_rise_bytes / r.tokens_cost)::BIGINT END AS fresh_x_tokens,
    c.capacity_bytes,
    c.persistent_neighbour_bytes,
    c.cap_bytes,
    CASE
        WHEN NOT r.at_fresh_baseline AND (r.input_cost IS NULL OR r.tokens_cost IS NULL) THEN 'raised_baseline'
        WHEN r.is_oom AND r.names_neighbour AND c.persistent_neighbour_bytes = 0 THEN 'neighbour_process'
        WHEN r.is_oom AND r.reserved_unallocated_bytes >= FRAGMENTED_REQUEST_MULTIPLE() * r.requested_bytes
             AND r.reserved_unallocated_bytes >= FRAGMENTED_CARD_SHARE() * r.device_total THEN 'fragmentation'
    END AS excluded_because
FROM rows AS r
JOIN fct_prompt_capacity AS c USING (instance, gpu_index);
