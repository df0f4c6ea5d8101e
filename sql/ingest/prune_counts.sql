-- The rows `oomlab prune` deletes, per table: every row dated before prune_cutoff.before_ts (requests, OOMs,
-- samples and engine reports by ts, job occurrences by their end, snapshots by their last trace time and the
-- rows of those snapshots). Rows without a time are kept; `sources` is kept so unchanged files stay skipped.
WITH cut AS (SELECT before_ts FROM prune_cutoff),
old_snapshots AS (
    SELECT snapshot_id FROM snapshots
    WHERE last_time_us IS NOT NULL AND make_timestamp(last_time_us) < (SELECT before_ts FROM cut)
)
SELECT * FROM (VALUES
    ('requests', (SELECT count(*) FROM requests WHERE ts < (SELECT before_ts FROM cut))),
    ('oom_events', (SELECT count(*) FROM oom_events WHERE ts < (SELECT before_ts FROM cut))),
    ('gpu_samples', (SELECT count(*) FROM gpu_samples WHERE ts < (SELECT before_ts FROM cut))),
    ('gpu_process_samples', (SELECT count(*) FROM gpu_process_samples WHERE ts < (SELECT before_ts FROM cut))),
    ('engine_samples', (SELECT count(*) FROM engine_samples WHERE ts < (SELECT before_ts FROM cut))),
    ('engine_memory', (SELECT count(*) FROM engine_memory WHERE ts < (SELECT before_ts FROM cut))),
    ('allocator_stats', (SELECT count(*) FROM allocator_stats WHERE ts < (SELECT before_ts FROM cut))),
    ('allocator_settings', (SELECT count(*) FROM allocator_settings WHERE ts < (SELECT before_ts FROM cut))),
    ('text_requests', (SELECT count(*) FROM text_requests WHERE ts < (SELECT before_ts FROM cut))),
    ('job_occurrences', (SELECT count(*) FROM job_occurrences WHERE end_ts < (SELECT before_ts FROM cut))),
    ('snapshots', (SELECT count(*) FROM snapshots WHERE snapshot_id IN (SELECT snapshot_id FROM old_snapshots))),
    ('snapshot_ooms', (SELECT count(*) FROM snapshot_ooms WHERE snapshot_id IN (SELECT snapshot_id FROM old_snapshots))),
    ('segments', (SELECT count(*) FROM segments WHERE snapshot_id IN (SELECT snapshot_id FROM old_snapshots))),
    ('blocks', (SELECT count(*) FROM blocks WHERE snapshot_id IN (SELECT snapshot_id FROM old_snapshots))),
    ('stacks', (SELECT count(*) FROM stacks WHERE snapshot_id IN (SELECT snapshot_id FROM old_snapshots))),
    ('frames', (SELECT count(*) FROM frames WHERE snapshot_id IN (SELECT snapshot_id FROM old_snapshots))),
    ('trace_events', (SELECT count(*) FROM trace_events WHERE snapshot_id IN (SELECT snapshot_id FROM old_snapshots)))
) AS t(table_name, row_count);
