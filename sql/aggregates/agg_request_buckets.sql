-- The aggregate tier (see agg_request_minutes): requests per minute (UTC) and power-of-two bucket of each prompt
-- feature (oomlab_pow2_bucket: input length, output length, batch size, batch x (input + output) tokens), one row
-- per minute, feature and bucket present, so that OOM rates are cut by prompt size without reading every request.
-- `key_order` is the bucket's lower bound, NULL where the row does not state the feature.
CREATE OR REPLACE VIEW agg_request_buckets AS
WITH sized AS (
    SELECT date_trunc('minute', ts) AS minute, input_sequence_length, output_sequence_length, batch_size,
           batch_size * (input_sequence_length + output_sequence_length) AS batch_tokens
    FROM stg_requests
), guessed AS (
    -- each bucket's guess a column (oomlab_pow2_guess): inline it is five logarithms a bucket
    SELECT *, oomlab_pow2_guess(input_sequence_length) AS input_guess,
           oomlab_pow2_guess(output_sequence_length) AS output_guess, oomlab_pow2_guess(batch_size) AS batch_guess,
           oomlab_pow2_guess(batch_tokens) AS tokens_guess
    FROM sized
), featured AS (
    SELECT
        minute,
        oomlab_pow2_settle(input_sequence_length, input_guess) AS input_length,
        oomlab_pow2_settle(output_sequence_length, output_guess) AS output_length,
        oomlab_pow2_settle(batch_size, batch_guess) AS batch_size,
        oomlab_pow2_settle(batch_tokens, tokens_guess) AS batch_tokens
    FROM guessed
)
SELECT
    minute,
    CASE WHEN grouping(input_length) = 0 THEN 'input_length'
         WHEN grouping(output_length) = 0 THEN 'output_length'
         WHEN grouping(batch_size) = 0 THEN 'batch_size'
         ELSE 'batch_tokens' END AS dimension,
    CASE WHEN grouping(input_length) = 0 THEN input_length
         WHEN grouping(output_length) = 0 THEN output_length
         WHEN grouping(batch_size) = 0 THEN batch_size
         ELSE batch_tokens END AS key_order,
    count(*) AS requests
FROM featured
GROUP BY GROUPING SETS ((minute, input_length), (minute, output_length), (minute, batch_size), (minute, batch_tokens));
