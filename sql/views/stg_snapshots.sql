-- snapshots as the snapshot views and queries read them: one row per snapshot file, as stored.
CREATE OR REPLACE VIEW stg_snapshots AS
SELECT * FROM snapshots;
