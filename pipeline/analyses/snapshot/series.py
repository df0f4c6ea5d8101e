"""Several snapshots of one process: their order, and each allocation site's growth from one to the next."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import polars as pl

from ...load.sql import sql_text
from .leak_evidence import floor_bytes

_GROWTH_SCHEMA = {
    "site": pl.String,
    "bytes": pl.List(pl.Int64),
    "blocks": pl.List(pl.Int64),
    "first_bytes": pl.Int64,
    "last_bytes": pl.Int64,
    "growth_bytes": pl.Int64,
    "growth_blocks": pl.Int64,
    "steps": pl.Int64,
    "grown_steps": pl.Int64,
    "present": pl.Boolean,
    "grew": pl.Boolean,
}


def series_snapshots(con: duckdb.DuckDBPyConnection, snapshot_ids: Sequence[int]) -> pl.DataFrame:
    """The snapshots with their path, instance, trace times and totals, in the order given."""
    rows = con.sql(sql_text("q_snapshot_series_snapshots"), params={"snapshot_ids": list(snapshot_ids)}).pl()
    order = pl.DataFrame({"snapshot_id": list(snapshot_ids), "_order": range(len(snapshot_ids))})
    return order.join(rows, on="snapshot_id", how="inner").sort("_order").drop("_order")


def order_snapshots(con: duckdb.DuckDBPyConnection, snapshot_ids: Sequence[int]) -> list[int]:
    """Oldest first: by the last trace time when every snapshot has one, else in the order given."""
    rows = series_snapshots(con, snapshot_ids)
    if rows.is_empty() or rows["last_time_us"].null_count():
        return [int(i) for i in rows["snapshot_id"]]
    return [int(i) for i in rows.with_row_index("_given").sort("last_time_us", "_given")["snapshot_id"]]


def instance_series(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> list[int]:
    """The snapshots of this one's instance taken up to it, oldest first, ending with it ([it] when alone)."""
    rows = con.sql(sql_text("q_snapshot_series_instance"), params={"snapshot_id": snapshot_id}).fetchall()
    ordered = order_snapshots(con, [row[0] for row in rows]) if rows else []
    if snapshot_id not in ordered:
        return [snapshot_id]
    return ordered[: ordered.index(snapshot_id) + 1]


def series_growth(con: duckdb.DuckDBPyConnection, ordered: Sequence[int]) -> pl.DataFrame:
    """Per site across snapshots oldest first: live bytes and blocks in each (0 where absent), the growth from
    the first to the last, the steps that rose, whether it held memory in all, and whether it grew (every step
    rose and the whole growth reaches the floor of the last snapshot); largest growth first."""
    if len(ordered) < 2:
        return pl.DataFrame(schema=_GROWTH_SCHEMA)
    rows = con.sql(sql_text("q_snapshot_series_sites"), params={"snapshot_ids": list(ordered)}).pl()
    position = pl.DataFrame({"snapshot_id": list(ordered), "position": range(len(ordered))})
    grid = rows.select("site").unique().join(position, how="cross")
    filled = (
        grid.join(rows, on=["site", "snapshot_id"], how="left")
        .with_columns(pl.col("live_bytes").fill_null(0), pl.col("live_blocks").fill_null(0))
        .sort("site", "position")
    )
    steps = len(ordered) - 1
    floor = floor_bytes(int(series_snapshots(con, [ordered[-1]])["allocated_bytes"].fill_null(0).sum()))
    growth = filled.group_by("site").agg(
        pl.col("live_bytes").cast(pl.Int64).alias("bytes"),
        pl.col("live_blocks").cast(pl.Int64).alias("blocks"),
        pl.col("live_bytes").first().cast(pl.Int64).alias("first_bytes"),
        pl.col("live_bytes").last().cast(pl.Int64).alias("last_bytes"),
        (pl.col("live_bytes").last() - pl.col("live_bytes").first()).cast(pl.Int64).alias("growth_bytes"),
        (pl.col("live_blocks").last() - pl.col("live_blocks").first()).cast(pl.Int64).alias("growth_blocks"),
        (pl.col("live_bytes").diff() > 0).sum().cast(pl.Int64).alias("grown_steps"),
        (pl.col("live_bytes") > 0).all().alias("present"),
    )
    return (
        growth.with_columns(pl.lit(steps, pl.Int64).alias("steps"))
        .with_columns(
            ((pl.col("grown_steps") == steps) & pl.col("present") & (pl.col("growth_bytes") >= floor)).alias("grew")
        )
        .select(list(_GROWTH_SCHEMA))
        .sort(["growth_bytes", "site"], descending=[True, False])
    )


def series_dict(con: duckdb.DuckDBPyConnection, ordered: Sequence[int], top: int) -> dict[str, Any] | None:
    """The growth across snapshots as JSON-ready data (None for one snapshot): the snapshots, oldest first,
    and the sites that changed most, with their bytes in each."""
    if len(ordered) < 2:
        return None
    snapshots = series_snapshots(con, ordered).select(
        "path", "first_time_us", "last_time_us", "allocated_bytes", "reserved_bytes"
    )
    growth = series_growth(con, ordered).filter(pl.col("growth_bytes") != 0)
    return {
        "snapshots": snapshots.to_dicts(),
        "sites": growth.sort(pl.col("growth_bytes").abs(), "site", descending=[True, False]).head(top).to_dicts(),
    }
