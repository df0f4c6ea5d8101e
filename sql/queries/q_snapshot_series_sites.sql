-- Live bytes and blocks per allocation site in each of the snapshots $snapshot_ids (one row per snapshot and
-- site that holds memory there). Used by oomlab.analyses.snapshot.series.
SELECT snapshot_id, site, live_bytes, live_blocks
FROM fct_snapshot_sites
WHERE list_contains($snapshot_ids::INTEGER[], snapshot_id);
