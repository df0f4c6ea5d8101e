"""Leak or cache growth from what the allocator said at several moments of one process (allocator_stats).

The article's first test: a leak is allocated memory that climbs; cache growth is reserved memory that
climbs while allocated stays (the caching allocator keeps freed blocks for reuse, which is not a leak).
Moments of one process are ordered by time, else by PyTorch's cumulative counters (fct_allocator_moments).
"""

from __future__ import annotations

import duckdb
import polars as pl

from ...load.sql import sql_text
from ...units import format_bytes_short
from .leaks import MIN_GROWTH_BYTES

LEAK, CACHE_GROWTH, STEADY, SHRINKING = "leak", "cache_growth", "steady", "shrinking"


def instance_moments(con: duckdb.DuckDBPyConnection, instance: str) -> pl.DataFrame:
    """One instance's allocator printouts in order (`all` pool): process, seq, ts, origin, source file,
    allocated / reserved now and at peak, inactive split bytes, CUDA OOMs and cudaMalloc retries so far."""
    return con.sql(sql_text("q_allocator_moments"), params={"instance": instance}).pl()


def allocator_series(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """One row per instance, GPU and process with two or more moments: first and last allocated and reserved,
    their growth, and `verdict`: 'leak' (allocated grew), 'cache_growth' (reserved grew, allocated did not),
    'steady' (neither) or 'shrinking' (allocated fell); `reason` says it with the numbers.

    A growth counts when it is at least the larger of MIN_GROWTH_BYTES (64 MiB, the fleet's leak floor: well
    above what one request's tensors leave behind) and twice the printout's unit (a summary floors sizes to
    whole MiB or GiB, so smaller changes may be rounding).
    """
    frame = con.sql(sql_text("q_allocator_series")).pl()
    if frame.is_empty():
        return frame
    frame = frame.with_columns(
        (pl.col("last_allocated_bytes") - pl.col("first_allocated_bytes")).alias("allocated_growth_bytes"),
        (pl.col("last_reserved_bytes") - pl.col("first_reserved_bytes")).alias("reserved_growth_bytes"),
        pl.max_horizontal(pl.lit(MIN_GROWTH_BYTES), 2 * pl.col("exact_to_bytes")).alias("floor_bytes"),
    )
    verdicts = [_verdict(row) for row in frame.iter_rows(named=True)]
    return frame.with_columns(
        pl.Series("verdict", [v for v, _ in verdicts], pl.Utf8),
        pl.Series("reason", [r for _, r in verdicts], pl.Utf8),
    )


def _verdict(row: dict) -> tuple[str, str]:
    """(verdict, reason) for one process's series."""
    grew, cached, floor = row["allocated_growth_bytes"], row["reserved_growth_bytes"], row["floor_bytes"]
    allocated = (
        f"{format_bytes_short(row['first_allocated_bytes'])} -> {format_bytes_short(row['last_allocated_bytes'])}"
    )
    reserved = f"{format_bytes_short(row['first_reserved_bytes'])} -> {format_bytes_short(row['last_reserved_bytes'])}"
    span = f"allocated {allocated}, reserved {reserved} over {row['moments']} moments"
    if grew >= floor:
        return LEAK, f"{span}: allocated memory climbs, so live tensors pile up (a leak)"
    if grew <= -floor:
        return SHRINKING, f"{span}: allocated memory fell"
    if cached >= floor:
        return CACHE_GROWTH, f"{span}: reserved grows while allocated stays: the allocator's cache, not a leak"
    return STEADY, f"{span}: neither allocated nor reserved memory grows"
