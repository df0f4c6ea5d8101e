"""Allocated and reserved memory over the trace of a snapshot, replayed backwards, downsampled for plots."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from ...load.settings import BLOCK_ROUNDING_BYTES
from ...load.sql import sql_text

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


def timeline(
    con: duckdb.DuckDBPyConnection, snapshot_id: int, device: int | None = None, max_points: int = 2000
) -> Timeline | None:
    """The replayed timeline of one device (default: the first with a trace); None without a trace."""
    device = _trace_device(con, snapshot_id) if device is None else device
    if device is None:
        return None
    full, start = replay(con, snapshot_id, device)
    peak_allocated = _peak(full, "allocated_bytes", start["allocated_bytes"])
    peak_reserved = _peak(full, "reserved_bytes", start["reserved_bytes"])
    return Timeline(
        points=downsample(full, max_points),
        event_count=full.height,
        start_allocated_bytes=start["allocated_bytes"],
        start_reserved_bytes=start["reserved_bytes"],
        final_allocated_bytes=int(full["allocated_bytes"][-1]),
        final_reserved_bytes=int(full["reserved_bytes"][-1]),
        peak_allocated_bytes=peak_allocated[0],
        peak_allocated_time_us=peak_allocated[1],
        peak_reserved_bytes=peak_reserved[0],
        peak_reserved_time_us=peak_reserved[1],
        oom_times_us=tuple(full.filter(pl.col("is_oom"))["time_us"].to_list()),
    )


def replay(con: duckdb.DuckDBPyConnection, snapshot_id: int, device: int) -> tuple[pl.DataFrame, dict[str, int]]:
    """Every trace event of a device with allocated, active and reserved bytes after it, replayed BACKWARDS
    from the final segments (the ring may have wrapped, so the start is unknown), and the values before
    the first event. The same numbers as the view fct_snapshot_timeline, in polars: a running sum there
    costs a sort of the whole trace."""
    params = {"snapshot_id": snapshot_id, "device": device}
    events = con.sql(sql_text("q_snapshot_timeline_events"), params=params).pl().sort("seq")
    final = con.sql(sql_text("q_snapshot_timeline_final"), params=params).pl().row(0, named=True)
    deltas = events.with_columns(
        (pl.col("action").replace_strict(signs, default=0, return_dtype=pl.Int64) * size)
        .fill_null(0)
        .alias(f"_d_{column}")
        for column, (_final, size, signs) in _REPLAYED.items()
    )
    start = {
        column: int(final[source] or 0) - int(deltas[f"_d_{column}"].sum())
        for column, (source, _size, _signs) in _REPLAYED.items()
    }
    full = deltas.with_columns(
        (start[column] + pl.col(f"_d_{column}").cum_sum()).alias(column) for column in _REPLAYED
    ).with_columns((pl.col("action") == "oom").alias("is_oom"))
    return full.drop(f"_d_{column}" for column in _REPLAYED), start


def downsample(points: pl.DataFrame, max_points: int = 2000) -> pl.DataFrame:
    """At most about `max_points` rows: per time bucket its first, last, lowest and highest rows of every
    value column, plus every OOM row, so no peak, dip or OOM marker is lost."""
    if points.height <= max_points:
        return points
    buckets = max(1, max_points // (2 + 2 * len(VALUE_COLUMNS)))
    x = pl.coalesce("time_us", "seq").cast(pl.Float64)
    indexed = points.with_row_index("_row").with_columns(
        ((x - x.min()) / (x.max() - x.min() + 1) * buckets).floor().cast(pl.Int64).alias("_bucket")
    )
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


def _trace_device(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> int | None:
    rows = con.sql(
        "SELECT min(device) FROM stg_trace_events WHERE snapshot_id = $snapshot_id", params={"snapshot_id": snapshot_id}
    ).fetchall()
    return rows[0][0] if rows else None


def _peak(full: pl.DataFrame, column: str, start: int) -> tuple[int, int | None]:
    """The highest value of `column` over the replay (the state before the first event included) and when."""
    row = full.row(int(full[column].arg_max() or 0), named=True)
    if start > row[column]:
        return start, full["time_us"][0]
    return int(row[column]), row["time_us"]
