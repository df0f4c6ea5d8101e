"""What the visible trace did at each allocation site, read in batches (`trace_batches`), so a trace of any
length costs one batch of memory: per site its allocations, the bytes it freed of blocks older than the trace,
and the growth of its baseline (the lowest live bytes of each of equal time windows) from the first window to
the last. Every figure is a sum, a minimum or a last value, so it is carried from batch to batch exactly."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from ...load.sql import sql_text
from .trace_batches import BATCH_ROWS, Span, batches, span

_GROWTH_SCHEMA = {"site": pl.String, "growth_bytes": pl.Int64, "rising_windows": pl.Int64}
_ACTIVITY_SCHEMA = {"site": pl.String, "trace_allocs": pl.Int64, "older_freed_bytes": pl.Int64}


@dataclass(frozen=True)
class SiteActivity:
    """Per site: `growth` (growth_bytes, rising_windows) and `activity` (trace_allocs, older_freed_bytes); and
    over the trace: how many events change active memory, and whether any freed a block older than the trace."""

    growth: pl.DataFrame
    activity: pl.DataFrame
    event_count: int
    frees_older: bool


def site_activity(
    con: duckdb.DuckDBPyConnection, snapshot_id: int, windows: int, batch_rows: int = BATCH_ROWS
) -> SiteActivity:
    """The SiteActivity of a snapshot's trace, cut into `windows` equal time windows."""
    params = {"snapshot_id": snapshot_id}
    extent = span(con, sql_text("q_snapshot_leaks_span"), params)
    live: dict[str, int] = {}  # each site's live bytes after the last batch read
    windowed: list[pl.DataFrame] = []
    activity: list[pl.DataFrame] = []
    frees_older = False
    for events in batches(con, sql_text("q_snapshot_leaks_events"), params, batch_rows):
        binned = _binned(events, extent, windows, live)
        windowed.append(
            binned.group_by("site", "window", maintain_order=True).agg(
                pl.col("live").min().alias("low"), pl.col("live").last().alias("end")
            )
        )
        activity.append(_activity(events))
        frees_older = frees_older or bool(events["frees_older"].any())
        live.update(binned.group_by("site").agg(pl.col("live").last()).iter_rows())
    if not windowed:
        return SiteActivity(pl.DataFrame(schema=_GROWTH_SCHEMA), pl.DataFrame(schema=_ACTIVITY_SCHEMA), 0, False)
    per_window = (
        pl.concat(windowed)
        .group_by("site", "window", maintain_order=True)
        .agg(pl.col("low").min(), pl.col("end").last())
    )
    totals = pl.concat(activity).group_by("site").agg(pl.col("trace_allocs", "older_freed_bytes").sum())
    growth = _baseline_growth(per_window, windows).with_columns(pl.col("site").cast(pl.String))
    return SiteActivity(growth, totals.with_columns(pl.col("site").cast(pl.String)), extent.rows, frees_older)


def _binned(events: pl.DataFrame, extent: Span, windows: int, live: dict[str, int]) -> pl.DataFrame:
    """Each event's window and its site's live bytes after it (the bytes carried from earlier batches plus
    this batch's running sum; frees count against the site that allocated the block)."""
    carried = pl.col("site").replace_strict(live, default=0, return_dtype=pl.Int64)
    return events.with_columns(
        extent.bins(windows).alias("window"), (carried + pl.col("delta").cum_sum().over("site")).alias("live")
    )


def _activity(events: pl.DataFrame) -> pl.DataFrame:
    """Per site, what a batch of the trace did there: allocations, and bytes freed of blocks older than it."""
    return events.group_by("site").agg(
        pl.col("is_alloc").sum().cast(pl.Int64).alias("trace_allocs"),
        (-pl.col("delta")).filter(pl.col("frees_older")).sum().cast(pl.Int64).alias("older_freed_bytes"),
    )


def _baseline_growth(per_window: pl.DataFrame, windows: int) -> pl.DataFrame:
    """Growth of each site's windowed minimum of live bytes, from the first window to the last, from each
    window's lowest and last live bytes (`low`, `end`; absent where the site had no event in it)."""
    grid = per_window.select("site").unique().join(pl.DataFrame({"window": range(windows)}), how="cross")
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
