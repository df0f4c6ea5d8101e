-- The distinct error messages of a source's OOM requests (source_ooms, stage_source_ooms.sql), to be parsed
-- once each; NULL stands for OOM requests without a message. No row at all: the source has no OOM request,
-- and nothing more to insert.
SELECT DISTINCT error
FROM source_ooms;
