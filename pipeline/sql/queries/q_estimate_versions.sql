-- Model versions with requests, most requests first: what `oomlab estimate --db` can compare with.
-- Used by oomlab.analyses.estimate.
SELECT model_version, count(*) AS requests
FROM stg_requests
WHERE model_version IS NOT NULL
GROUP BY model_version
ORDER BY requests DESC, model_version;
