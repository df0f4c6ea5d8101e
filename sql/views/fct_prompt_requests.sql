-- Every request with batch and prompt sizes, its device's usable capacity, and whether it may stand in a
-- clean threshold model. Left out (`excluded_because`), since they fail for reasons other than their size:
--   raised_baseline    allocated_before more than 64 MiB above the lowest of its deployment (instance, GPU
--                      and model version: every lifetime of a version restarts at the same weights), so a
--                      leak or resident growth left less room; 64 MiB is well under 1 % of any card here
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
        coalesce(len(e.other_processes), 0) > 0 AS names_neighbour,
        coalesce(e.reserved_unallocated_bytes, r.reserved_memory - r.allocator_allocated)
            AS reserved_unallocated_bytes,
        coalesce(e.requested_bytes, r.requested_size) AS requested_bytes
    FROM stg_requests AS r
    JOIN baselines AS b
        ON b.instance = r.instance AND b.gpu_index = r.gpu_index
       AND b.model_version IS NOT DISTINCT FROM r.model_version
    LEFT JOIN stg_oom_events AS e
        ON e.origin = 'structured' AND e.source_id = r.source_id AND e.line = r.line
    WHERE r.device_total > 0 AND r.instance IS NOT NULL
      AND r.batch_size > 0 AND r.input_sequence_length > 0
)
SELECT
    r.* EXCLUDE (names_neighbour),
    c.capacity_bytes,
    c.persistent_neighbour_bytes,
    c.cap_bytes,
    CASE
        WHEN r.allocated_before > r.deployment_baseline + RAISED_BASELINE_BYTES() THEN 'raised_baseline'
        WHEN r.is_oom AND r.names_neighbour AND c.persistent_neighbour_bytes = 0 THEN 'neighbour_process'
        WHEN r.is_oom AND r.reserved_unallocated_bytes >= FRAGMENTED_REQUEST_MULTIPLE() * r.requested_bytes
             AND r.reserved_unallocated_bytes >= FRAGMENTED_CARD_SHARE() * r.device_total THEN 'fragmentation'
    END AS excluded_because
FROM rows AS r
JOIN fct_prompt_capacity AS c USING (instance, gpu_index);
