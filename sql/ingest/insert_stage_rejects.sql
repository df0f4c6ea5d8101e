-- Keep every row of a normalized stage that could not be loaded, with its reason (`ingest_staged` as in
-- insert_requests.sql). Run only when the accepted rows fall short of the rows read.
INSERT INTO rejects
SELECT $source_id, line, reject_reason, raw
FROM ingest_staged AS staged
WHERE reject_reason IS NOT NULL;
