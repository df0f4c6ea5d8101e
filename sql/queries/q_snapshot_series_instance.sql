-- Every snapshot of the process that snapshot $snapshot_id came from, as far as labels tell: the same instance
-- and device (itself included; none when it has no instance label). Used by oomlab.analyses.snapshot.series.
SELECT s.snapshot_id
FROM stg_snapshots AS s
JOIN stg_snapshots AS t
    ON t.snapshot_id = $snapshot_id AND s.instance = t.instance AND s.device IS NOT DISTINCT FROM t.device
ORDER BY s.snapshot_id;
