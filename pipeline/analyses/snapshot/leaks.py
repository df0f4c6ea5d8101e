"""Leak suspects: allocation sites whose live memory piles up, judged from what the snapshot holds.

A production trace is a ring (`max_entries`): once it wraps, most live blocks were allocated before it
begins, and growth inside the visible trace is the wrong test. So each site is judged on all it shows: the
call path of its blocks (serving or model loading), how many shapes and rounds of blocks it holds, its share
of allocated memory, the blocks that outlived the trace, what the trace did there, and, given several
snapshots of one process, its growth between them (`leak_verdict.judge`).
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import polars as pl

from ...parse.snapshot.stacks import NO_STACK
from .leak_evidence import floor_bytes, site_callers, site_live, site_shapes
from .leak_trace import SiteActivity, site_activity
from .leak_verdict import Basis, judge
from .series import series_growth

DEFAULT_WINDOWS = 10
# The columns of `leak_suspects`, in this order (docs/schema.md, "Output of snapshot inspect").
SUSPECT_COLUMNS = (
    "site",
    "caller",
    "stack",
    "confidence",
    "reason",
    "path",
    "live_bytes",
    "live_blocks",
    "share_of_allocated",
    "shapes",
    "round_blocks",
    "before_trace_bytes",
    "before_trace_blocks",
    "growth_bytes",
    "rising_windows",
    "window_steps",
    "series_growth_bytes",
    "basis",
)


def site_growth(
    con: duckdb.DuckDBPyConnection,
    snapshot_id: int,
    windows: int = DEFAULT_WINDOWS,
    activity: SiteActivity | None = None,
) -> pl.DataFrame:
    """Per site: baseline growth over equal time windows of the trace (frees counted against the site
    that allocated the block), the number of rising window steps, and the live bytes and ages at the end."""
    activity = site_activity(con, snapshot_id, windows) if activity is None else activity
    live = site_live(con, snapshot_id)
    joined = live.join(activity.growth, on="site", how="full", coalesce=True)
    return joined.with_columns(
        pl.col("growth_bytes").fill_null(0),
        pl.col("rising_windows").fill_null(0),
        pl.col("live_bytes").fill_null(0),
        pl.col("live_blocks").fill_null(0),
        pl.col("before_trace_bytes").fill_null(0),
        pl.col("before_trace_blocks").fill_null(0),
        pl.lit(windows - 1 if activity.event_count else 0).alias("window_steps"),
    ).sort("growth_bytes", "live_bytes", descending=True)


def site_evidence(
    con: duckdb.DuckDBPyConnection, snapshot_id: int, windows: int = DEFAULT_WINDOWS, series: Sequence[int] = ()
) -> tuple[pl.DataFrame, Basis]:
    """Every site with live memory and all the evidence `judge` weighs, and what the judgement rests on."""
    activity = site_activity(con, snapshot_id, windows)
    allocated = _allocated_bytes(con, snapshot_id)
    evidence = (
        site_growth(con, snapshot_id, windows, activity)
        .filter(pl.col("live_bytes") > 0)
        .join(site_shapes(con, snapshot_id), on="site", how="left")
        .join(site_callers(con, snapshot_id), on="site", how="left")
        .join(activity.activity, on="site", how="left")
        .with_columns(
            pl.col("path").fill_null("unknown"),
            pl.col("shapes").fill_null(0),
            pl.col("round_blocks").fill_null(0),
            pl.col("largest_round_bytes").fill_null(0),
            pl.col("trace_allocs").fill_null(0),
            pl.col("older_freed_bytes").fill_null(0),
            (pl.col("live_bytes") / max(allocated, 1)).alias("share_of_allocated"),
        )
    )
    ordered = [*(i for i in series if i != snapshot_id), snapshot_id]  # this snapshot closes the series
    if len(ordered) > 1:
        evidence = evidence.join(_series_columns(con, ordered), on="site", how="left")
    no_stack = int(evidence.filter(pl.col("site") == NO_STACK)["live_bytes"].sum())
    basis = Basis(_trace_basis(activity, evidence), len(ordered), floor_bytes(allocated), no_stack)
    return evidence, basis


def leak_suspects(
    con: duckdb.DuckDBPyConnection, snapshot_id: int, windows: int = DEFAULT_WINDOWS, series: Sequence[int] = ()
) -> pl.DataFrame:
    """The suspects of a snapshot, surest first, each with its confidence and reason (SUSPECT_COLUMNS).
    `series`: earlier snapshots of the same process, oldest first (this one closes it, named or not)."""
    return leak_judgement(con, snapshot_id, windows, series)[0]


def leak_judgement(
    con: duckdb.DuckDBPyConnection, snapshot_id: int, windows: int = DEFAULT_WINDOWS, series: Sequence[int] = ()
) -> tuple[pl.DataFrame, Basis]:
    """The suspects (as `leak_suspects`) and what the judgement rested on, which holds with no suspect too."""
    evidence, basis = site_evidence(con, snapshot_id, windows, series)
    rows = []
    for site in evidence.to_dicts():
        verdict = judge(site, basis)
        if verdict is not None:
            rows.append({**site, "confidence": verdict.confidence, "reason": verdict.reason, "basis": basis.trace})
    schema = {name: evidence.schema.get(name, pl.Int64) for name in SUSPECT_COLUMNS}
    schema.update(confidence=pl.Float64, reason=pl.String, basis=pl.String, series_growth_bytes=pl.Int64)
    schema.update(caller=pl.String, stack=pl.List(pl.String))
    suspects = pl.DataFrame([{name: row.get(name) for name in SUSPECT_COLUMNS} for row in rows], schema=schema)
    return suspects.sort(["confidence", "live_bytes", "site"], descending=[True, True, False]), basis


def _allocated_bytes(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> int:
    query = "SELECT allocated_bytes FROM stg_snapshots WHERE snapshot_id = $snapshot_id"
    rows = con.sql(query, params={"snapshot_id": snapshot_id}).fetchall()
    return int(rows[0][0] or 0) if rows else 0


def _trace_basis(activity: SiteActivity, evidence: pl.DataFrame) -> str:
    """Whether a trace exists, and whether it began after some live block was allocated (a wrapped ring, or
    history turned on late) or freed a block it never saw allocated."""
    if not activity.event_count:
        return "none"
    older_live = int(evidence["before_trace_blocks"].sum()) if evidence.height else 0
    return "wrapped" if older_live > 0 or activity.frees_older else "whole"


def _series_columns(con: duckdb.DuckDBPyConnection, ordered: list[int]) -> pl.DataFrame:
    """The growth across the series, under the names `judge` reads."""
    growth = series_growth(con, ordered)
    return growth.select(
        "site",
        pl.col("growth_bytes").alias("series_growth_bytes"),
        pl.col("steps").alias("series_steps"),
        pl.col("grew").alias("series_grew"),
    )
