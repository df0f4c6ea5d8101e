-- Model versions with requests, most requests first: what `oomlab estimate --db` can compare with.
-- Used by oomlab.analyses.estimate.
SELECT model_version, CAST(sum(requests) AS BIGINT) AS requests
FROM agg_request_sources
WHERE model_version IS NOT NULL
GROUP BY model_version
ORDER BY requests DESC, model_version;
