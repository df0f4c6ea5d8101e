-- Snapshots whose trace ends in [$since, $until) (all snapshots when both are null), newest first, with the
-- instance and the time they show. Used by oomlab.report.snapshots and oomlab.findings.leak_site.
SELECT snapshot_id, instance, model_version, path,
       make_timestamp(last_time_us) AS taken_at,
       allocated_bytes, reserved_bytes, oom_count
FROM stg_snapshots
WHERE ($since IS NULL OR make_timestamp(last_time_us) >= $since::TIMESTAMP)
  AND ($until IS NULL OR make_timestamp(last_time_us) < $until::TIMESTAMP)
ORDER BY last_time_us DESC NULLS LAST, snapshot_id;
