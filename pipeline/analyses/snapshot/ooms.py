"""OOM moments of a snapshot: the allocator's state just before each `oom` trace entry, and its cause."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from ...load.settings import CONTEXT_MAX_BYTES
from ...load.sql import sql_text
from ...units import format_bytes
from .layout import LayoutReplay, LayoutState

FRAGMENTATION, CAPACITY, PER_PROCESS_CAP, EXTERNAL_PRESSURE = (
    "fragmentation",
    "capacity",
    "per_process_cap",
    "external_pressure",
)
# A caching allocator always keeps some slack. Fragmentation is the cause only when, after serving the
# request, at least this share of the reserved memory would still be free: a near-full cache (a leak at
# its cap, a device taken by others) with a little scattered slack is not a fragmentation OOM.
FRAGMENTED_SLACK_SHARE = 0.10


@dataclass(frozen=True)
class OomMoment:
    """One failed allocation and the state the allocator was in when it failed."""

    seq: int
    device: int
    time_us: int | None
    requested_bytes: int
    device_free_bytes: int | None
    allocated_bytes: int
    reserved_bytes: int
    reserved_unallocated_bytes: int
    largest_free_block_bytes: int
    cause: str
    explanation: str


def oom_moments(
    con: duckdb.DuckDBPyConnection, snapshot_id: int, device_total_bytes: int | None = None
) -> list[OomMoment]:
    """Every `oom` entry of the snapshot with its state (replayed back from the final layout) and cause."""
    ooms = con.sql(sql_text("q_snapshot_ooms_ooms"), params={"snapshot_id": snapshot_id}).fetchall()
    moments: list[OomMoment] = []
    for device in sorted({row[1] for row in ooms}):
        rows = [row for row in ooms if row[1] == device]
        states = _states_at(con, snapshot_id, device, [row[0] for row in rows])
        moments.extend(_moment(row, states[row[0]], device_total_bytes) for row in rows)
    return sorted(moments, key=lambda m: m.seq)


def classify_oom(
    requested: int, device_free: int | None, state: LayoutState, device_total_bytes: int | None = None
) -> tuple[str, str]:
    """The cause of one OOM as (cause, one-line explanation), from docs/domain.md's signatures."""
    unallocated, largest = state.reserved_unallocated_bytes, state.largest_free_block_bytes
    if largest < requested and unallocated - requested >= FRAGMENTED_SLACK_SHARE * state.reserved_bytes:
        return FRAGMENTATION, (
            f"{_gib(unallocated)} reserved but unallocated, yet the largest free block is "
            f"{_gib(largest)}, smaller than the {_gib(requested)} requested"
        )
    if device_free is not None and device_free >= requested:
        return PER_PROCESS_CAP, (
            f"the device still had {_gib(device_free)} free: a per-process limit "
            f"(set_per_process_memory_fraction) stopped the {_gib(requested)} request"
        )
    others = _others_bytes(device_total_bytes, device_free, state.reserved_bytes)
    if others is not None and others > state.reserved_bytes:
        return EXTERNAL_PRESSURE, (
            f"other processes hold about {_gib(others)}, more than this process's "
            f"{_gib(state.reserved_bytes)}; {_gib(device_free or 0)} was free"
        )
    free_text = "unknown" if device_free is None else _gib(device_free)
    return CAPACITY, (
        f"{_gib(requested)} requested with {free_text} free on the device and "
        f"{_gib(unallocated)} cached by this process"
    )


def _others_bytes(total: int | None, free: int | None, reserved: int) -> int | None:
    """Memory held outside this process's allocator, beyond the largest CUDA context; None when the total is
    unknown."""
    if total is None or free is None:
        return None
    return total - free - reserved - CONTEXT_MAX_BYTES


def _moment(row: tuple, state: LayoutState, device_total_bytes: int | None) -> OomMoment:
    seq, device, time_us, requested, device_free = row
    cause, explanation = classify_oom(requested or 0, device_free, state, device_total_bytes)
    return OomMoment(
        seq,
        device,
        time_us,
        requested or 0,
        device_free,
        state.allocated_bytes,
        state.reserved_bytes,
        state.reserved_unallocated_bytes,
        state.largest_free_block_bytes,
        cause,
        explanation,
    )


def _states_at(
    con: duckdb.DuckDBPyConnection, snapshot_id: int, device: int, seqs: list[int]
) -> dict[int, LayoutState]:
    """The layout state right after each event in `seqs` (an oom entry changes nothing)."""
    replay = _final_layout(con, snapshot_id, device)
    wanted = sorted(seqs, reverse=True)
    states: dict[int, LayoutState] = {}
    after = {"snapshot_id": snapshot_id, "device": device, "first_seq": min(seqs)}
    events = con.sql(sql_text("q_snapshot_ooms_events_after"), params=after).fetchall()
    for seq, action, addr, size in events:
        while wanted and seq <= wanted[0]:
            states[wanted.pop(0)] = replay.state()
        replay.undo(action, addr, size or 0)
    for seq in wanted:
        states[seq] = replay.state()
    return states


def _final_layout(con: duckdb.DuckDBPyConnection, snapshot_id: int, device: int) -> LayoutReplay:
    params = {"snapshot_id": snapshot_id, "device": device}
    ranges = con.sql(sql_text("q_snapshot_ooms_segments"), params=params).fetchall()
    blocks = con.sql(sql_text("q_snapshot_ooms_active_blocks"), params=params).fetchall()
    allocated = sum(size for _addr, size, is_allocated in blocks if is_allocated)
    return LayoutReplay(ranges, {addr: size for addr, size, _a in blocks}, allocated)


def _gib(value: int) -> str:
    return format_bytes(value, "GiB")
