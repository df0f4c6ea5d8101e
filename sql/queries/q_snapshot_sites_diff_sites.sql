-- Live bytes and blocks per allocation site in snapshot $before_id and $after_id, largest change first.
-- Used by oomlab.analyses.snapshot.sites.
WITH a AS (SELECT site, live_bytes, live_blocks FROM fct_snapshot_sites WHERE snapshot_id = $before_id),
     b AS (SELECT site, live_bytes, live_blocks FROM fct_snapshot_sites WHERE snapshot_id = $after_id)
SELECT
    coalesce(a.site, b.site) AS site,
    coalesce(a.live_bytes, 0) AS before_bytes,
    coalesce(b.live_bytes, 0) AS after_bytes,
    coalesce(b.live_bytes, 0) - coalesce(a.live_bytes, 0) AS delta_bytes,
    coalesce(a.live_blocks, 0) AS before_blocks,
    coalesce(b.live_blocks, 0) AS after_blocks,
    coalesce(b.live_blocks, 0) - coalesce(a.live_blocks, 0) AS delta_blocks
FROM a FULL OUTER JOIN b ON a.site = b.site
ORDER BY abs(delta_bytes) DESC, site;
