"""The snapshot part of an incident: the allocator's state at the failure, why the request did not fit,
where the memory was allocated, what grew, and the replayed timeline."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import duckdb

from ..analyses.snapshot.leaks import leak_suspects
from ..analyses.snapshot.ooms import oom_moments
from ..analyses.snapshot.series import instance_series, series_dict
from ..analyses.snapshot.state import snapshot_devices, snapshot_state, would_fit
from ..analyses.snapshot.timeline import timeline
from ..units import file_name
from .snapshots import snapshots_in_window, top_sites

SUSPECTS = 5
GROWTH_SITES = 8


def snapshot_view(
    con: duckdb.DuckDBPyConnection, snapshot_id: int | None, requested_bytes: int | None, gpu_index: int | None = None
) -> dict[str, Any] | None:
    """Everything the incident page shows of the snapshot that recorded the failure; None without one. Of a
    process that used several GPUs, the state, the fit and the replay are those of the device that failed
    (`gpu_index`, where the snapshot holds it)."""
    if snapshot_id is None:
        return None
    info = next(s for s in snapshots_in_window(con, None, None) if s["snapshot_id"] == snapshot_id)
    series = instance_series(con, snapshot_id)
    devices = snapshot_devices(con, snapshot_id)
    device = gpu_index if gpu_index in devices else None
    return {
        "info": info,
        "device": device if len(devices) > 1 else None,
        "state": asdict(snapshot_state(con, snapshot_id, device)),
        "fit": asdict(would_fit(con, snapshot_id, requested_bytes, device)) if requested_bytes else None,
        "ooms": [asdict(m) for m in oom_moments(con, snapshot_id) if device is None or m.device == device],
        "top_sites": top_sites(con, [snapshot_id]),
        "leak_suspects": leak_suspects(con, snapshot_id, series=series).head(SUSPECTS).to_dicts(),
        "growth": _growth(con, series),
        "timeline": _replayed(con, snapshot_id, device),
    }


def _growth(con: duckdb.DuckDBPyConnection, series: list[int]) -> dict[str, Any] | None:
    """Each site's live bytes in every snapshot of the instance up to this one, oldest first (None with one):
    the snapshots by file name and time, the sites that changed most."""
    growth = series_dict(con, series, GROWTH_SITES)
    if growth is None:
        return None
    for snapshot in growth["snapshots"]:
        snapshot["file"] = file_name(snapshot.pop("path"))
        last = snapshot["last_time_us"]
        snapshot["taken_at"] = None if last is None else _at(last)
    return growth


def _replayed(con: duckdb.DuckDBPyConnection, snapshot_id: int, device: int | None) -> dict[str, Any] | None:
    """Allocated and reserved bytes replayed from the trace of `device` (None: the first with one; downsampled),
    with the OOM moments."""
    replay = timeline(con, snapshot_id, device=device)
    if replay is None:
        return None
    points = replay.points
    return {
        "time": [_at(t) for t in points["time_us"].to_list()],
        "allocated_bytes": points["allocated_bytes"].to_list(),
        "reserved_bytes": points["reserved_bytes"].to_list(),
        "oom_times": [_at(t) for t in replay.oom_times_us if t is not None],
        "events": replay.event_count,
        "peak_allocated_bytes": replay.peak_allocated_bytes,
    }


def _at(time_us: int) -> datetime:
    """Trace time (wall-clock microseconds) as naive UTC, like every stored time."""
    return datetime.fromtimestamp(time_us / 1e6, UTC).replace(tzinfo=None)
