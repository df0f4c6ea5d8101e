-- The distinct error messages of a source's OOM requests, to be parsed once each.
SELECT DISTINCT error
FROM requests
WHERE source_id = $source_id
  AND error IS NOT NULL
  AND oomlab_is_oom(status, error);
