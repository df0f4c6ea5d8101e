"""Allocation sites of a snapshot's live memory, their full stacks, and the difference of two snapshots."""

from __future__ import annotations

import duckdb
import polars as pl

from ...load.sql import sql_text


def allocation_sites(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> pl.DataFrame:
    """Live bytes and blocks per site (`file:function:line`), largest first, with an example stack id."""
    return con.sql(
        "SELECT rank, site, live_bytes, live_blocks, requested_bytes, internal_waste_bytes, "
        "share_of_allocated "
        "FROM rpt_snapshot_top_sites WHERE snapshot_id = $snapshot_id ORDER BY rank",
        params={"snapshot_id": snapshot_id},
    ).pl()


def site_stacks(con: duckdb.DuckDBPyConnection, snapshot_id: int, site: str) -> pl.DataFrame:
    """Every full stack of live blocks allocated at `site`: the frames, innermost first, and the bytes."""
    return con.sql(sql_text("q_snapshot_sites_site_stacks"), params={"snapshot_id": snapshot_id, "site": site}).pl()


def diff_sites(con: duckdb.DuckDBPyConnection, before_id: int, after_id: int) -> pl.DataFrame:
    """Per site: live bytes and blocks before and after, and the change; largest change first."""
    return con.sql(sql_text("q_snapshot_sites_diff_sites"), params={"before_id": before_id, "after_id": after_id}).pl()


def diff_segments(con: duckdb.DuckDBPyConnection, before_id: int, after_id: int) -> pl.DataFrame:
    """Segments only in one of the two snapshots (keyed by address and size, as PyTorch's `compare`)."""
    params = {"before_id": before_id, "after_id": after_id}
    return con.sql(sql_text("q_snapshot_sites_diff_segments"), params=params).pl()
