-- The aggregate tier (see agg_request_minutes): the requests of stg_requests that succeeded, counted per device,
-- model version and size, batch x (input + output) tokens as for an OOM (fct_oom_context): what a device served,
-- and how large, for q_served_at_least. Exact sizes, since a card's edge lies between two of them; bounded by
-- devices x versions x distinct sizes, not by the requests.
CREATE OR REPLACE VIEW agg_served_tokens AS
SELECT
    instance,
    gpu_index,
    model_version,
    batch_size * (input_sequence_length + coalesce(output_sequence_length, 0)) AS tokens,
    count(*) AS requests
FROM stg_requests
WHERE NOT is_oom AND batch_size IS NOT NULL AND input_sequence_length IS NOT NULL
GROUP BY instance, gpu_index, model_version,
         batch_size * (input_sequence_length + coalesce(output_sequence_length, 0));
