-- allocator_settings as the analyses read them: one row per option a process stated, as stored.
CREATE OR REPLACE VIEW stg_allocator_settings AS
SELECT * FROM allocator_settings;
