-- What one model version measured, per card size: the largest successful request's peak allocated memory and
-- its shape, the allocated memory at rest (weights and buffers: the least any request started from), the
-- bytes per token (least-squares slope of what a request added against batch x (input + output)) and the
-- devices it ran on. What `oomlab estimate --db` sets beside the estimate.
-- Used by oomlab.analyses.estimate.
SELECT device_total,
       list(DISTINCT {'instance': instance, 'gpu_index': gpu_index}) AS devices,
       count(*) AS requests,
       max(peak_allocated) AS peak_allocated_bytes,
       arg_max({'batch': batch_size, 'input_len': input_sequence_length, 'output_len': output_sequence_length},
               peak_allocated) AS peak_request,
       min(allocated_before) AS at_rest_bytes,
       regr_slope(need_bytes, batch_size * (input_sequence_length + output_sequence_length)) AS bytes_per_token,
       regr_r2(need_bytes, batch_size * (input_sequence_length + output_sequence_length)) AS bytes_per_token_r2
FROM fct_water_requests
WHERE model_version = $model_version AND NOT is_oom AND peak_allocated IS NOT NULL
  AND batch_size > 0 AND input_sequence_length IS NOT NULL AND output_sequence_length IS NOT NULL
GROUP BY device_total
ORDER BY device_total;
