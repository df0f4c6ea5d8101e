-- The clean requests on a fresh baseline (no neighbour or fragmentation) the risk model is fitted on, in the UTC days
-- that start in [$since, $until): the PROMPT_MODEL_ROWS with the lowest sample_key of agg_prompt_sample, an even,
-- deterministic sample (all of them when there are fewer). Its features are the requests' own sizes.
-- Used by oomlab.analyses.fleet.prompt_risk.
WITH clean AS (
    SELECT s.*, c.capacity_bytes
    FROM agg_prompt_sample AS s
    JOIN fct_prompt_capacity AS c USING (instance, gpu_index)
    WHERE oomlab_prompt_exclusion(false, s.names_neighbour, false, c.persistent_neighbour_bytes) IS NULL
      AND ($since::TIMESTAMP IS NULL OR s.day >= $since) AND ($until::TIMESTAMP IS NULL OR s.day < $until)
    ORDER BY s.sample_key, s.output_sequence_length, s.is_oom
    LIMIT PROMPT_MODEL_ROWS()
)
SELECT model_version, capacity_bytes, is_oom, batch_size, input_sequence_length, output_sequence_length,
       batch_x_input, batch_x_tokens
FROM clean
-- a fixed order: cross-validation folds are drawn by position, and reruns must agree
ORDER BY instance, gpu_index, ts, request_id, batch_size, input_sequence_length;
