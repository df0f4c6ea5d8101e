-- A deterministic sample of the clean requests (on a fresh baseline, no neighbour or fragmentation) the risk
-- model is fitted on: its features are the requests' own sizes.
-- Used by oomlab.analyses.fleet.prompt_risk.
SELECT model_version, capacity_bytes, is_oom, batch_size, input_sequence_length, output_sequence_length,
       batch_x_input, batch_x_tokens
FROM fct_prompt_requests
WHERE excluded_because IS NULL AND at_fresh_baseline AND ($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until)
  -- a deterministic 1-in-`every` sample: the model needs shape, not every row of a 10M-request fleet
  AND hash(instance, gpu_index, ts, request_id, batch_size, input_sequence_length) % $every = 0
-- a fixed order: cross-validation folds are drawn by position, and reruns must agree
ORDER BY instance, gpu_index, ts, request_id, batch_size, input_sequence_length;
