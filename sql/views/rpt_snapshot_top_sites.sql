-- Allocation sites of each snapshot ranked by live bytes, with their share of allocated memory.
CREATE OR REPLACE VIEW rpt_snapshot_top_sites AS
SELECT
    f.snapshot_id,
    row_number() OVER (PARTITION BY f.snapshot_id ORDER BY f.live_bytes DESC, f.site) AS rank,
    f.site,
    f.live_bytes,
    f.live_blocks,
    f.requested_bytes,
    f.internal_waste_bytes,
    CASE WHEN s.allocated_bytes = 0 THEN 0.0 ELSE f.live_bytes / s.allocated_bytes END AS share_of_allocated
FROM fct_snapshot_sites AS f
JOIN stg_snapshots AS s ON s.snapshot_id = f.snapshot_id;
