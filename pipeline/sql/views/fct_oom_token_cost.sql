-- Per model version, the memory a request needs above the baseline per batch x (input + output) token:
-- a least-squares line through the successful requests' peak_allocated - allocated_before.
CREATE OR REPLACE VIEW fct_oom_token_cost AS
SELECT
    model_version,
    regr_slope(peak_allocated - allocated_before, tokens) AS bytes_per_token,
    regr_intercept(peak_allocated - allocated_before, tokens) AS fixed_bytes,
    regr_r2(peak_allocated - allocated_before, tokens) AS r2,
    regr_count(peak_allocated - allocated_before, tokens) AS requests,
    max(tokens) AS max_ok_tokens
FROM (
    SELECT
        model_version,
        peak_allocated,
        allocated_before,
        batch_size * (coalesce(input_sequence_length, 0) + coalesce(output_sequence_length, 0)) AS tokens
    FROM stg_requests
    WHERE NOT is_oom
)
GROUP BY model_version;
