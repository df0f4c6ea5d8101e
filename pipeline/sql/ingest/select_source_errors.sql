-- The distinct error messages of a source's OOM requests, to be parsed once each; NULL stands for OOM
-- requests without a message. No row at all: the source has no OOM request, and nothing more to insert.
SELECT DISTINCT error
FROM requests
WHERE source_id = $source_id
  AND oomlab_is_oom(status, error);
