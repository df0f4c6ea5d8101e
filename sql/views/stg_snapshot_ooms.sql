-- snapshot_ooms as the snapshot queries read them: the `oom` entries of each snapshot's trace.
CREATE OR REPLACE VIEW stg_snapshot_ooms AS
SELECT * FROM snapshot_ooms;
