-- Per model version, the memory a request needs above the baseline per batch x (input + output) token:
-- a least-squares line through the successful requests' peak_allocated - allocated_before, and its residual
-- standard error (`residual_bytes`: how far a request's real need typically lies from its estimate), over all
-- requests and among the largest tenth (`edge_residual_bytes`, where a card's edge is reached; as a share of each
-- request's estimated need there, `edge_relative_residual`).
-- (agg_token_cost, the aggregate tier's, computed where the requests are).
CREATE OR REPLACE VIEW fct_oom_token_cost AS
SELECT model_version, bytes_per_token, fixed_bytes, r2, residual_bytes, edge_residual_bytes, edge_relative_residual,
       requests, max_ok_tokens
FROM agg_token_cost;
