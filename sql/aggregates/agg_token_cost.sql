-- The aggregate tier (see agg_request_minutes): per model version, the memory a successful request needs above its
-- baseline per batch x (input + output) token: a least-squares line through peak_allocated - allocated_before.
CREATE OR REPLACE VIEW agg_token_cost AS
WITH served AS (
    SELECT
        model_version,
        peak_allocated - allocated_before AS need_bytes,
        batch_size * (coalesce(input_sequence_length, 0) + coalesce(output_sequence_length, 0)) AS tokens
    FROM stg_requests
    WHERE NOT is_oom
)
SELECT
    model_version,
    regr_slope(need_bytes, tokens) AS bytes_per_token,
    regr_intercept(need_bytes, tokens) AS fixed_bytes,
    regr_r2(need_bytes, tokens) AS r2,
    -- the residual standard error: how far a request's real need lies from the line, typically (allocator rounding
    -- and shapes the token count does not capture); NULL with fewer than 3 requests
    CASE WHEN regr_count(need_bytes, tokens) > 2
         THEN sqrt(greatest(0, regr_syy(need_bytes, tokens) * (1 - coalesce(regr_r2(need_bytes, tokens), 0)))
                   / (regr_count(need_bytes, tokens) - 2)) END AS residual_bytes,
    CAST(regr_count(need_bytes, tokens) AS BIGINT) AS requests,
    max(tokens) AS max_ok_tokens
FROM served
GROUP BY model_version;
