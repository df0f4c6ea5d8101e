-- source_placements as stored: the device each file's rows are on and what says so.
CREATE OR REPLACE VIEW stg_source_placements AS
SELECT * FROM source_placements;
