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
),
line AS (
    SELECT
        model_version,
        regr_slope(need_bytes, tokens) AS bytes_per_token,
        regr_intercept(need_bytes, tokens) AS fixed_bytes,
        regr_r2(need_bytes, tokens) AS r2,
        -- the residual standard error: how far a request's real need lies from the line, typically (allocator
        -- rounding and shapes the token count does not capture); NULL with fewer than 3 requests
        CASE WHEN regr_count(need_bytes, tokens) > 2
             THEN sqrt(greatest(0, regr_syy(need_bytes, tokens) * (1 - coalesce(regr_r2(need_bytes, tokens), 0)))
                       / (regr_count(need_bytes, tokens) - 2)) END AS residual_bytes,
        CAST(regr_count(need_bytes, tokens) AS BIGINT) AS requests,
        max(tokens) AS max_ok_tokens,
        quantile_cont(tokens, 0.9) AS edge_tokens
    FROM served
    GROUP BY model_version
),
-- The same error among the largest tenth of the requests: a card's edge is reached by its largest requests, and
-- where the scatter grows with the size (bytes per token that vary per request) it is wider there than over all
-- requests; where it does not (the real H200 captures' 102 llama-mini-v3 requests: 2.8 MB among the largest
-- tenth, 5.2 MB over all, the allocator's rounding), the classifier keeps the larger. A tenth: the largest
-- requests, and still enough of them for a spread (11 of 102 there). A root mean square about the line, not
-- about the tenth's own mean: the line's bias there is error too. `edge_relative_residual` is the same scatter as
-- a share of each request's estimated need: where bytes per token vary per request the error grows with the
-- request, and a request at the card's edge can be larger than any of the tenth (the classifier scales it).
edge_residuals AS (
    SELECT s.model_version, s.need_bytes - (l.fixed_bytes + l.bytes_per_token * s.tokens) AS residual,
           l.fixed_bytes + l.bytes_per_token * s.tokens AS fitted
    FROM served AS s
    JOIN line AS l ON s.model_version = l.model_version
    WHERE s.tokens >= l.edge_tokens
),
edge AS (
    SELECT model_version,
           CASE WHEN count(*) > 2 THEN sqrt(avg(residual * residual)) END AS edge_residual_bytes,
           CASE WHEN count(*) FILTER (WHERE fitted > 0) > 2
                THEN sqrt(avg((residual / fitted) * (residual / fitted)) FILTER (WHERE fitted > 0))
           END AS edge_relative_residual
    FROM edge_residuals
    GROUP BY model_version
)
SELECT line.model_version, line.bytes_per_token, line.fixed_bytes, line.r2, line.residual_bytes,
       edge.edge_residual_bytes, edge.edge_relative_residual, line.requests, line.max_ok_tokens
FROM line
LEFT JOIN edge ON line.model_version = edge.model_version;
