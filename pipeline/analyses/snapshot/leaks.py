"""Leak suspects: allocation sites whose live bytes keep growing across a snapshot's trace."""

from __future__ import annotations

import duckdb
import polars as pl

from ...load.sql import sql_text

DEFAULT_WINDOWS = 10
# A suspect's baseline (the lowest live bytes in a window) must rise in at least this share of window
# steps: a leak climbs steadily, while weights or a resident cache arrive once and then stay flat.
MIN_RISING_SHARE = 0.5
# ...and grow by at least this much, absolutely and relative to the allocated memory at the end.
MIN_GROWTH_BYTES = 1 << 20
MIN_GROWTH_SHARE = 0.01


def site_growth(con: duckdb.DuckDBPyConnection, snapshot_id: int, windows: int = DEFAULT_WINDOWS) -> pl.DataFrame:
    """Per site: baseline growth over equal time windows of the trace (frees counted against the site
    that allocated the block), the number of rising window steps, and the live bytes and ages at the end."""
    events = con.sql(sql_text("q_snapshot_leaks_events"), params={"snapshot_id": snapshot_id}).pl()
    live = con.sql(sql_text("q_snapshot_leaks_live"), params={"snapshot_id": snapshot_id}).pl()
    if events.is_empty():
        growth = pl.DataFrame(schema={"site": pl.String, "growth_bytes": pl.Int64, "rising_windows": pl.Int64})
    else:
        growth = _baseline_growth(events, windows)
    joined = live.join(growth, on="site", how="full", coalesce=True)
    return joined.with_columns(
        pl.col("growth_bytes").fill_null(0),
        pl.col("rising_windows").fill_null(0),
        pl.col("live_bytes").fill_null(0),
        pl.col("live_blocks").fill_null(0),
        pl.lit(windows - 1).alias("window_steps"),
    ).sort("growth_bytes", "live_bytes", descending=True)


def leak_suspects(con: duckdb.DuckDBPyConnection, snapshot_id: int, windows: int = DEFAULT_WINDOWS) -> pl.DataFrame:
    """Sites that grow steadily and still hold the growth at the end, ranked by growth."""
    query = "SELECT allocated_bytes FROM stg_snapshots WHERE snapshot_id = $snapshot_id"
    allocated = con.sql(query, params={"snapshot_id": snapshot_id}).fetchall()
    threshold = max(MIN_GROWTH_BYTES, MIN_GROWTH_SHARE * (allocated[0][0] if allocated else 0))
    growth = site_growth(con, snapshot_id, windows)
    return growth.filter(
        (pl.col("growth_bytes") >= threshold)
        & (pl.col("rising_windows") >= MIN_RISING_SHARE * pl.col("window_steps"))
        & (pl.col("live_bytes") > 0)
    )


def _baseline_growth(events: pl.DataFrame, windows: int) -> pl.DataFrame:
    """Growth of each site's windowed minimum of live bytes, from the first window to the last."""
    x = pl.coalesce("time_us", "seq").cast(pl.Float64)
    binned = events.sort("seq").with_columns(
        ((x - x.min()) / (x.max() - x.min() + 1) * windows).floor().cast(pl.Int64).alias("window"),
        pl.col("delta").cum_sum().over("site").alias("live"),
    )
    per_window = binned.group_by("site", "window").agg(
        pl.col("live").min().alias("low"), pl.col("live").last().alias("end")
    )
    grid = binned.select("site").unique().join(pl.DataFrame({"window": range(windows)}), how="cross")
    filled = (
        grid.join(per_window, on=["site", "window"], how="left")
        .sort("site", "window")
        .with_columns(
            # The value entering a window is where the previous one ended (0 before the first event).
            pl.col("end").forward_fill().shift(1).over("site").fill_null(0).alias("entering")
        )
    )
    baseline = filled.with_columns(pl.min_horizontal("low", "entering").alias("baseline"))
    return baseline.group_by("site").agg(
        (pl.col("baseline").last() - pl.col("baseline").first()).alias("growth_bytes"),
        (pl.col("baseline").diff() > 0).sum().cast(pl.Int64).alias("rising_windows"),
    )
