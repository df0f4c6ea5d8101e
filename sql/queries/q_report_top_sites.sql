-- The $top allocation sites of each snapshot in $snapshot_ids by live bytes. Used by oomlab.report.snapshots.
SELECT snapshot_id, rank, site, live_bytes, live_blocks, share_of_allocated
FROM rpt_snapshot_top_sites
WHERE list_contains($snapshot_ids::INTEGER[], snapshot_id) AND rank <= $top
ORDER BY snapshot_id, rank;
