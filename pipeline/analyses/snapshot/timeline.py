"""Allocated and reserved memory over the trace of a snapshot, replayed backwards, downsampled for plots.

The trace is replayed in batches (`trace_batches`): values are running sums relative to the state before the
first event, carried from batch to batch, and only each batch's candidate points (its firsts, lasts, peaks,
dips and OOMs per plot bin) are kept. The state before the first event is known only once every event is
summed (the replay runs backwards from the final segments), so the kept points are shifted by it at the end:
a shift moves no peak or dip, so the points are those a replay of the whole trace would keep."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import duckdb
import polars as pl

from ...load.settings import BLOCK_ROUNDING_BYTES
from ...load.sql import sql_text
from .trace_batches import BATCH_ROWS, Span, batches, span

VALUE_COLUMNS = ("allocated_bytes", "active_bytes", "reserved_bytes")
# the trace records requested sizes; blocks are whole multiples of BLOCK_ROUNDING_BYTES (512)
_BLOCK = ((pl.col("size") + (BLOCK_ROUNDING_BYTES - 1)) // BLOCK_ROUNDING_BYTES) * BLOCK_ROUNDING_BYTES
_SEGMENT = pl.col("size")
# Per replayed column: the final-state column of `segments`, the bytes an event moves, and its sign by action.
_REPLAYED = {
    "allocated_bytes": ("allocated_size", _BLOCK, {"alloc": 1, "free_requested": -1, "free": -1}),
    "active_bytes": ("active_size", _BLOCK, {"alloc": 1, "free_completed": -1, "free": -1}),
    "reserved_bytes": (
        "total_size",
        _SEGMENT,
        {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1},
    ),
}


@dataclass(frozen=True)
class Timeline:
    """Points to plot (every OOM and peak kept) and the figures a report quotes."""

    points: pl.DataFrame
    event_count: int
    start_allocated_bytes: int
    start_reserved_bytes: int
    final_allocated_bytes: int
    final_reserved_bytes: int
    peak_allocated_bytes: int
    peak_allocated_time_us: int | None
    peak_reserved_bytes: int
    peak_reserved_time_us: int | None
    oom_times_us: tuple[int | None, ...]


@dataclass
class _Peak:
    """The first highest value of a column relative to the start, and when (the start itself counts as 0)."""

    value: int = 0
    time_us: int | None = None
    seen: bool = False

    def update(self, batch: pl.DataFrame, column: str) -> None:
        row = batch.row(int(batch[column].arg_max() or 0), named=True)
        if not self.seen or row[column] > self.value:
            self.value, self.time_us, self.seen = int(row[column]), row["time_us"], True


def timeline(
    con: duckdb.DuckDBPyConnection,
    snapshot_id: int,
    device: int | None = None,
    max_points: int = 2000,
    batch_rows: int = BATCH_ROWS,
) -> Timeline | None:
    """The replayed timeline of one device (default: the first with a trace); None without a trace."""
    device = _trace_device(con, snapshot_id) if device is None else device
    if device is None:
        return None
    params = {"snapshot_id": snapshot_id, "device": device}
    extent = span(con, sql_text("q_snapshot_timeline_span"), params)
    if extent.rows == 0:
        return None
    thin = extent.rows > max_points
    kept: list[pl.DataFrame] = []
    peaks = {column: _Peak() for column in ("allocated_bytes", "reserved_bytes")}
    first_time_us: int | None = None
    totals = dict.fromkeys(_REPLAYED, 0)
    for batch in _relative_batches(con, params, batch_rows, totals):
        first_time_us = batch["time_us"][0] if not kept else first_time_us
        kept.append(_pick(batch, extent, max_points) if thin else batch)
        for column, peak in peaks.items():
            peak.update(batch, column)
    start = _start(con, params, totals)
    points = _shifted(pl.concat(kept), start)
    allocated, reserved = (_absolute(peaks[c], start[c], first_time_us) for c in ("allocated_bytes", "reserved_bytes"))
    return Timeline(
        points=_pick(points, extent, max_points) if thin else points,
        event_count=extent.rows,
        start_allocated_bytes=start["allocated_bytes"],
        start_reserved_bytes=start["reserved_bytes"],
        final_allocated_bytes=start["allocated_bytes"] + totals["allocated_bytes"],
        final_reserved_bytes=start["reserved_bytes"] + totals["reserved_bytes"],
        peak_allocated_bytes=allocated[0],
        peak_allocated_time_us=allocated[1],
        peak_reserved_bytes=reserved[0],
        peak_reserved_time_us=reserved[1],
        oom_times_us=tuple(points.filter(pl.col("is_oom"))["time_us"].to_list()),
    )


def replay(
    con: duckdb.DuckDBPyConnection, snapshot_id: int, device: int, batch_rows: int = BATCH_ROWS
) -> tuple[pl.DataFrame, dict[str, int]]:
    """Every trace event of a device with allocated, active and reserved bytes after it, replayed BACKWARDS
    from the final segments (the ring may have wrapped, so the start is unknown), and the values before
    the first event. The same numbers as the view fct_snapshot_timeline, in polars: a running sum there
    costs a sort of the whole trace. Holds the whole trace: `timeline` is the bounded way to plot one."""
    params = {"snapshot_id": snapshot_id, "device": device}
    totals = dict.fromkeys(_REPLAYED, 0)
    parts = list(_relative_batches(con, params, batch_rows, totals))
    start = _start(con, params, totals)
    return _shifted(pl.concat(parts), start) if parts else pl.DataFrame(), start


def downsample(points: pl.DataFrame, max_points: int = 2000) -> pl.DataFrame:
    """At most about `max_points` rows: per time bucket its first, last, lowest and highest rows of every
    value column, plus every OOM row, so no peak, dip or OOM marker is lost."""
    if points.height <= max_points:
        return points
    x = pl.coalesce("time_us", "seq").cast(pl.Float64)
    low, high = points.select(x.min().alias("low"), x.max().alias("high")).row(0)
    return _pick(points, Span(points.height, low, high), max_points)


def _pick(points: pl.DataFrame, extent: Span, max_points: int) -> pl.DataFrame:
    """`downsample`'s rows of `points`, binned over `extent` (the whole trace's, when `points` is one batch of
    it: the picks of every batch, picked again, are the picks of the whole, first occurrences included)."""
    buckets = max(1, max_points // (2 + 2 * len(VALUE_COLUMNS)))
    indexed = points.with_row_index("_row").with_columns(extent.bins(buckets).alias("_bucket"))
    keep = [pl.col("_row").first().alias("first"), pl.col("_row").last().alias("last")]
    for column in VALUE_COLUMNS:
        keep += [
            pl.col("_row").get(pl.col(column).arg_max()).alias(f"max_{column}"),
            pl.col("_row").get(pl.col(column).arg_min()).alias(f"min_{column}"),
        ]
    picked = indexed.group_by("_bucket").agg(keep).drop("_bucket").unpivot()["value"]
    ooms = indexed.filter(pl.col("is_oom"))["_row"]
    rows = pl.concat([picked, ooms]).unique().sort()
    return indexed[rows.to_list()].drop("_row", "_bucket")


def _relative_batches(
    con: duckdb.DuckDBPyConnection, params: dict[str, int], batch_rows: int, totals: dict[str, int]
) -> Iterator[pl.DataFrame]:
    """Each batch of events with every value column relative to the state before the first event; `totals`
    (all 0 at the start) is kept at the relative values after the last event yielded."""
    for events in batches(con, sql_text("q_snapshot_timeline_events"), params, batch_rows):
        batch = events.with_columns(
            (
                totals[column]
                + (pl.col("action").replace_strict(signs, default=0, return_dtype=pl.Int64) * size)
                .fill_null(0)
                .cum_sum()
            ).alias(column)
            for column, (_final, size, signs) in _REPLAYED.items()
        ).with_columns((pl.col("action") == "oom").alias("is_oom"))
        totals.update((column, int(batch[column][-1])) for column in _REPLAYED)
        yield batch


def _start(con: duckdb.DuckDBPyConnection, params: dict[str, int], totals: dict[str, int]) -> dict[str, int]:
    """The values before the first event: the final state less everything the trace added."""
    final = con.sql(sql_text("q_snapshot_timeline_final"), params=params).pl().row(0, named=True)
    return {column: int(final[source] or 0) - totals[column] for column, (source, _s, _a) in _REPLAYED.items()}


def _shifted(points: pl.DataFrame, start: dict[str, int]) -> pl.DataFrame:
    """Relative values made absolute, and the action as text again (batches carry it as Categorical)."""
    return points.with_columns(pl.col(column) + start[column] for column in _REPLAYED).with_columns(
        pl.col("action").cast(pl.String)
    )


def _absolute(peak: _Peak, start: int, first_time_us: int | None) -> tuple[int, int | None]:
    """The highest value over the replay (the state before the first event included) and when."""
    if peak.value < 0:  # every event left less than there was before the first
        return start, first_time_us
    return start + peak.value, peak.time_us


def _trace_device(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> int | None:
    rows = con.sql(
        "SELECT min(device) FROM stg_trace_events WHERE snapshot_id = $snapshot_id", params={"snapshot_id": snapshot_id}
    ).fetchall()
    return rows[0][0] if rows else None
