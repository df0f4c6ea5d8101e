-- Every request with batch and prompt sizes (stg_prompt_requests), its device's usable capacity, and whether it
-- may stand in a clean threshold model. Left out (`excluded_because`), since they fail for reasons other than their
-- size:
--   raised_baseline    a raised baseline whose size costs are not known to SIZE_COST_MAX_ERROR
--   neighbour_process  an OOM whose message names another process that the device's other OOMs do not all name
--   fragmentation      an OOM with the memory there, in pieces
-- One row per request: for `oomlab query` and inspection (analyses.fleet.prompt_threshold.prompt_requests). The
-- analyses read the same rows counted by size (agg_prompt_sizes) and sampled (agg_prompt_sample).
CREATE OR REPLACE VIEW fct_prompt_requests AS
SELECT
    r.instance, r.gpu_index, r.ts, r.model_version, r.request_id, r.is_oom, r.device_total, r.batch_size,
    r.input_sequence_length, r.output_sequence_length, r.batch_x_input, r.batch_x_tokens, r.allocated_before,
    r.deployment_baseline, r.baseline_rise_bytes, r.at_fresh_baseline, r.reserved_unallocated_bytes,
    r.requested_bytes, r.fresh_x_input, r.fresh_x_tokens,
    c.capacity_bytes,
    c.persistent_neighbour_bytes,
    c.cap_bytes,
    oomlab_prompt_exclusion(r.cost_unknown, r.names_neighbour, r.fragmented, c.persistent_neighbour_bytes)
        AS excluded_because
FROM stg_prompt_requests AS r
JOIN fct_prompt_capacity AS c USING (instance, gpu_index);
