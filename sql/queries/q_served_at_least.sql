-- For each ($instances, $gpus, $versions, $tokens)[i] (the smallest request of a version that failed on a device,
-- as four lists of one length): how many requests of that version on that device of at least that many tokens
-- succeeded, the largest that succeeded below it, and how many succeeded there in all. A request log's rows
-- (agg_served_tokens) and a text log's request lines both count; tokens are batch x (input + output), as for an
-- OOM (fct_oom_context).
-- Used by oomlab.analyses.fleet.served.
WITH failed_sizes AS (
    SELECT unnest($instances::VARCHAR[]) AS instance, unnest($gpus::INTEGER[]) AS gpu_index,
           unnest($versions::VARCHAR[]) AS model_version, unnest($tokens::BIGINT[]) AS tokens
),
served AS (
    SELECT instance, gpu_index, model_version, tokens, requests FROM agg_served_tokens
    UNION ALL
    SELECT instance, gpu_index, model_version, tokens, 1 AS requests FROM stg_text_requests WHERE succeeded
)
SELECT f.instance, f.gpu_index, f.model_version, f.tokens,
       coalesce(sum(s.requests) FILTER (WHERE s.tokens >= f.tokens), 0)::BIGINT AS served_at_least,
       max(s.tokens) FILTER (WHERE s.tokens < f.tokens) AS served_below,
       coalesce(sum(s.requests), 0)::BIGINT AS served
FROM failed_sizes AS f
LEFT JOIN served AS s
    ON s.instance = f.instance AND s.gpu_index = f.gpu_index AND s.model_version = f.model_version
GROUP BY ALL
ORDER BY ALL;
