"""Allocation sites of a snapshot's live memory, their full stacks, and the difference of two snapshots."""

from __future__ import annotations

import duckdb
import polars as pl


def allocation_sites(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> pl.DataFrame:
    """Live bytes and blocks per site (`file:function:line`), largest first, with an example stack id."""
    return con.sql(
        "SELECT rank, site, live_bytes, live_blocks, requested_bytes, internal_waste_bytes, "
        "share_of_allocated "
        "FROM rpt_snapshot_top_sites WHERE snapshot_id = ? ORDER BY rank",
        params=[snapshot_id],
    ).pl()


def site_stacks(con: duckdb.DuckDBPyConnection, snapshot_id: int, site: str) -> pl.DataFrame:
    """Every full stack of live blocks allocated at `site`: the frames, innermost first, and the bytes."""
    return con.sql(_SITE_STACKS, params=[snapshot_id, site, snapshot_id]).pl()


def diff_sites(con: duckdb.DuckDBPyConnection, before_id: int, after_id: int) -> pl.DataFrame:
    """Per site: live bytes and blocks before and after, and the change; largest change first."""
    return con.sql(_DIFF_SITES, params=[before_id, after_id]).pl()


def diff_segments(con: duckdb.DuckDBPyConnection, before_id: int, after_id: int) -> pl.DataFrame:
    """Segments only in one of the two snapshots (keyed by address and size, as PyTorch's `compare`)."""
    return con.sql(_DIFF_SEGMENTS, params=[before_id, after_id, after_id, before_id]).pl()


_SITE_STACKS = """
WITH live AS (
    SELECT stack_id, sum(size)::BIGINT AS live_bytes, count(*) AS live_blocks
    FROM stg_snapshot_blocks WHERE snapshot_id = ? AND site = ? AND is_allocated
    GROUP BY stack_id
)
SELECT l.stack_id, l.live_bytes, l.live_blocks, f.depth, f.filename, f.name, f.line
FROM live AS l
JOIN frames AS f ON f.snapshot_id = ? AND f.stack_id = l.stack_id
ORDER BY l.live_bytes DESC, l.stack_id, f.depth
"""
_DIFF_SITES = """
WITH a AS (SELECT site, live_bytes, live_blocks FROM fct_snapshot_sites WHERE snapshot_id = ?),
     b AS (SELECT site, live_bytes, live_blocks FROM fct_snapshot_sites WHERE snapshot_id = ?)
SELECT
    coalesce(a.site, b.site) AS site,
    coalesce(a.live_bytes, 0) AS before_bytes,
    coalesce(b.live_bytes, 0) AS after_bytes,
    coalesce(b.live_bytes, 0) - coalesce(a.live_bytes, 0) AS delta_bytes,
    coalesce(a.live_blocks, 0) AS before_blocks,
    coalesce(b.live_blocks, 0) AS after_blocks,
    coalesce(b.live_blocks, 0) - coalesce(a.live_blocks, 0) AS delta_blocks
FROM a FULL OUTER JOIN b ON a.site = b.site
ORDER BY abs(delta_bytes) DESC, site
"""
_DIFF_SEGMENTS = """
SELECT 'removed' AS change, address, total_size, pool, stream FROM segments AS s
WHERE snapshot_id = ? AND NOT EXISTS (
    SELECT 1 FROM segments AS o
    WHERE o.snapshot_id = ? AND o.address = s.address AND o.total_size = s.total_size)
UNION ALL
SELECT 'added' AS change, address, total_size, pool, stream FROM segments AS s
WHERE snapshot_id = ? AND NOT EXISTS (
    SELECT 1 FROM segments AS o
    WHERE o.snapshot_id = ? AND o.address = s.address AND o.total_size = s.total_size)
ORDER BY change, address
"""
