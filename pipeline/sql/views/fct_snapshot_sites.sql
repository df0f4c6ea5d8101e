-- Live (allocated) bytes and blocks per snapshot and allocation site in the final state.
CREATE OR REPLACE VIEW fct_snapshot_sites AS
SELECT
    snapshot_id,
    site,
    sum(size)::BIGINT AS live_bytes,
    count(*) AS live_blocks,
    sum(requested_size)::BIGINT AS requested_bytes,
    sum(internal_waste_bytes)::BIGINT AS internal_waste_bytes,
    min(stack_id) AS example_stack_id
FROM stg_snapshot_blocks
WHERE is_allocated
GROUP BY snapshot_id, site;
