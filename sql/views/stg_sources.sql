-- sources as reports and commands read them: one row per ingested file, as stored.
CREATE OR REPLACE VIEW stg_sources AS
SELECT * FROM sources;
