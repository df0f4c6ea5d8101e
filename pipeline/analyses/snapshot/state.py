"""The final allocator state of a snapshot: totals per pool, fragmentation, whether a request would fit."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from ...errors import DatabaseError
from ...load.settings import BLOCK_ROUNDING_BYTES
from ...units import format_bytes

# The caching allocator's pools: requests up to 1 MiB come from the small pool, larger ones from the large.
SMALL_REQUEST_BYTES = 1 << 20


@dataclass(frozen=True)
class SnapshotState:
    """What the allocator held when the snapshot was taken."""

    allocated_bytes: int
    active_bytes: int
    reserved_bytes: int
    reserved_unallocated_bytes: int
    requested_bytes: int
    free_bytes: int
    largest_free_block_bytes: int
    fragmentation: float
    internal_waste_bytes: int
    small_reserved_bytes: int
    large_reserved_bytes: int
    private_reserved_bytes: int
    segment_count: int
    block_count: int
    expandable_segments: bool
    trace_event_count: int
    oom_count: int
    first_time_us: int | None
    last_time_us: int | None


@dataclass(frozen=True)
class FitVerdict:
    """Would a request of `requested_bytes` be served from the memory this process already holds?"""

    requested_bytes: int
    pool: str
    fits: bool
    cause: str
    reason: str
    largest_free_block_bytes: int
    pool_free_bytes: int
    reserved_unallocated_bytes: int


def snapshot_state(con: duckdb.DuckDBPyConnection, snapshot_id: int, device: int | None = None) -> SnapshotState:
    """Totals, fragmentation (1 - largest free block / total free) and internal waste (size - requested): of the
    whole snapshot, or of one `device` of it where it holds that device's segments (a multi-GPU process's devices
    are separate memory; the allocator's settings and its trace stay the snapshot's)."""
    row = con.sql(
        "SELECT * EXCLUDE (snapshot_id) FROM fct_snapshot_state WHERE snapshot_id = $snapshot_id",
        params={"snapshot_id": snapshot_id},
    ).pl()
    if row.is_empty():
        raise DatabaseError(f"no snapshot with id {snapshot_id} in the database", hint="see the snapshots table")
    whole = row.row(0, named=True)
    if device is not None:
        own = device_states(con, snapshot_id).filter(pl.col("device") == device).drop("device")
        whole |= own.row(0, named=True) if own.height else {}
    return SnapshotState(**whole)


def device_states(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> pl.DataFrame:
    """One row per device whose segments the snapshot holds (fct_snapshot_devices), in device order."""
    return con.sql(
        "SELECT * EXCLUDE (snapshot_id) FROM fct_snapshot_devices WHERE snapshot_id = $snapshot_id ORDER BY device",
        params={"snapshot_id": snapshot_id},
    ).pl()


def snapshot_devices(con: duckdb.DuckDBPyConnection, snapshot_id: int) -> list[int]:
    """The devices whose segments the snapshot holds, in order."""
    return [int(device) for device in device_states(con, snapshot_id)["device"]]


def pool_states(con: duckdb.DuckDBPyConnection, snapshot_id: int, device: int | None = None) -> pl.DataFrame:
    """One row per device and pool (small / large / private): segments, reserved, allocated, free, largest free
    block; of one `device` where given."""
    return con.sql(
        "SELECT * EXCLUDE (snapshot_id) FROM fct_snapshot_pools WHERE snapshot_id = $snapshot_id "
        "AND ($device::INTEGER IS NULL OR device = $device) ORDER BY device, pool",
        params={"snapshot_id": snapshot_id, "device": device},
    ).pl()


def would_fit(
    con: duckdb.DuckDBPyConnection, snapshot_id: int, requested_bytes: int, device: int | None = None
) -> FitVerdict:
    """Whether a new request fits a free block of its pool on `device` (without one: on the device whose pool has
    the largest free block, as a request may be sent to any), and if not, why not."""
    rounded = -(-requested_bytes // BLOCK_ROUNDING_BYTES) * BLOCK_ROUNDING_BYTES
    pool = "small" if rounded <= SMALL_REQUEST_BYTES else "large"
    pools = pool_states(con, snapshot_id, device)
    rows = pools.filter(pl.col("pool") == pool).sort(["largest_free_block_bytes", "device"], descending=[True, False])
    best = rows.row(0, named=True) if rows.height else None
    largest = int(best["largest_free_block_bytes"]) if best else 0
    pool_free = int(best["free_bytes"]) if best else 0
    on = pools if best is None else pools.filter(pl.col("device") == best["device"])
    unallocated = int(on["reserved_unallocated_bytes"].sum())
    cause, reason = _fit_reason(rounded, pool, largest, pool_free)
    return FitVerdict(requested_bytes, pool, cause == "fits", cause, reason, largest, pool_free, unallocated)


def _fit_reason(rounded: int, pool: str, largest: int, pool_free: int) -> tuple[str, str]:
    """(cause, one line): fits, fragmentation (enough free in total, no block large enough), or new memory."""
    if largest >= rounded:
        return "fits", f"a free block of {_mib(largest)} in the {pool} pool can hold {_mib(rounded)}"
    if pool_free >= rounded:
        return "fragmentation", (
            f"the {pool} pool has {_mib(pool_free)} free in total, but its largest free "
            f"block is {_mib(largest)}: the request needs new memory from CUDA"
        )
    return "needs_new_memory", (
        f"only {_mib(pool_free)} free in the {pool} pool: {_mib(rounded)} must come "
        "from a new cudaMalloc, which fails if the device (or the process cap) is full"
    )


def _mib(value: int) -> str:
    return format_bytes(value, "MiB", 1)
