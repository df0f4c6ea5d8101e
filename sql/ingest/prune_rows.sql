-- Delete what prune_counts.sql counts (the same conditions, table by table; snapshot rows before snapshots).
CREATE OR REPLACE TEMP TABLE prune_snapshots AS
SELECT snapshot_id FROM snapshots
WHERE last_time_us IS NOT NULL AND make_timestamp(last_time_us) < (SELECT before_ts FROM prune_cutoff);
DELETE FROM requests WHERE ts < (SELECT before_ts FROM prune_cutoff);
DELETE FROM oom_events WHERE ts < (SELECT before_ts FROM prune_cutoff);
DELETE FROM gpu_samples WHERE ts < (SELECT before_ts FROM prune_cutoff);
DELETE FROM gpu_process_samples WHERE ts < (SELECT before_ts FROM prune_cutoff);
DELETE FROM engine_samples WHERE ts < (SELECT before_ts FROM prune_cutoff);
DELETE FROM engine_memory WHERE ts < (SELECT before_ts FROM prune_cutoff);
DELETE FROM allocator_stats WHERE ts < (SELECT before_ts FROM prune_cutoff);
DELETE FROM allocator_settings WHERE ts < (SELECT before_ts FROM prune_cutoff);
DELETE FROM text_requests WHERE ts < (SELECT before_ts FROM prune_cutoff);
DELETE FROM job_occurrences WHERE end_ts < (SELECT before_ts FROM prune_cutoff);
-- an OOM event kept (dated on or after the cut, or undated) no longer points at a snapshot that is gone
UPDATE oom_events SET snapshot_id = NULL WHERE snapshot_id IN (SELECT snapshot_id FROM prune_snapshots);
DELETE FROM snapshot_ooms WHERE snapshot_id IN (SELECT snapshot_id FROM prune_snapshots);
DELETE FROM segments WHERE snapshot_id IN (SELECT snapshot_id FROM prune_snapshots);
DELETE FROM blocks WHERE snapshot_id IN (SELECT snapshot_id FROM prune_snapshots);
DELETE FROM stacks WHERE snapshot_id IN (SELECT snapshot_id FROM prune_snapshots);
DELETE FROM frames WHERE snapshot_id IN (SELECT snapshot_id FROM prune_snapshots);
DELETE FROM trace_events WHERE snapshot_id IN (SELECT snapshot_id FROM prune_snapshots);
DELETE FROM snapshots WHERE snapshot_id IN (SELECT snapshot_id FROM prune_snapshots);
DROP TABLE prune_snapshots;
DROP TABLE prune_cutoff;
