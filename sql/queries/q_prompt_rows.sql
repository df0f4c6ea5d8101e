-- Clean requests with their sizes in [$since, $until): what thresholds are cut on.
-- Used by oomlab.analyses.fleet.prompt_threshold.
SELECT instance, gpu_index, ts, model_version, device_total, capacity_bytes, is_oom,
       batch_size, input_sequence_length, output_sequence_length, batch_x_input, batch_x_tokens,
       baseline_rise_bytes, at_fresh_baseline, fresh_x_input, fresh_x_tokens, excluded_because
FROM fct_prompt_requests
WHERE ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until);
