"""`snapshot inspect` and `snapshot diff`: every snapshot analysis as one stable, JSON-ready dict."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from ...errors import InputError
from ...load.snapshot import load_snapshot, scratch_database
from .leaks import SUSPECT_COLUMNS, leak_judgement
from .ooms import oom_moments
from .series import order_snapshots, series_dict
from .sites import allocation_sites, diff_segments, diff_sites
from .state import device_states, pool_states, snapshot_state, would_fit
from .timeline import timeline

_STATE_KEYS = (
    "allocated_bytes",
    "active_bytes",
    "reserved_bytes",
    "reserved_unallocated_bytes",
    "requested_bytes",
    "largest_free_block_bytes",
    "free_bytes",
    "fragmentation",
    "internal_waste_bytes",
    "expandable_segments",
    "first_time_us",
    "last_time_us",
)
_TIMELINE_KEYS = (
    "event_count",
    "start_allocated_bytes",
    "start_reserved_bytes",
    "peak_allocated_bytes",
    "peak_allocated_time_us",
    "peak_reserved_bytes",
    "peak_reserved_time_us",
    "final_allocated_bytes",
    "final_reserved_bytes",
)


def inspect_snapshot(
    paths: str | Path | Sequence[str | Path],
    requested_bytes: int | None = None,
    *,
    top: int = 10,
    device_total_bytes: int | None = None,
) -> dict[str, Any]:
    """Read one snapshot, or several of one process, into a scratch database and return every analysis of
    the newest (docs/schema.md); several are ordered oldest first by their trace times (else as given), and
    the growth across them is judged and returned as `series`."""
    files = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not files:
        raise InputError("snapshot inspect", "no snapshot file given", hint="name one or more snapshot files")
    with scratch_database() as con:
        for snapshot_id, path in enumerate(files, start=1):
            load_snapshot(con, path, snapshot_id)
        ordered = order_snapshots(con, range(1, len(files) + 1))
        return inspect_database(
            con, ordered[-1], requested_bytes, top=top, device_total_bytes=device_total_bytes, series=ordered
        )


def inspect_database(
    con: duckdb.DuckDBPyConnection,
    snapshot_id: int,
    requested_bytes: int | None = None,
    *,
    top: int = 10,
    device_total_bytes: int | None = None,
    series: Sequence[int] = (),
) -> dict[str, Any]:
    """The `inspect` dict for a snapshot already in a database (ingested or in memory); `series`: snapshots
    of the same process, oldest first, ending with this one, whose growth the leak judgement weighs."""
    state = snapshot_state(con, snapshot_id)
    meta = (
        con.sql(
            "SELECT path, format, legacy_shapes, allocator_settings FROM stg_snapshots "
            "WHERE snapshot_id = $snapshot_id",
            params={"snapshot_id": snapshot_id},
        )
        .pl()
        .row(0, named=True)
    )
    result: dict[str, Any] = {
        "path": meta["path"],
        "format": meta["format"],
        "legacy_shapes": list(meta["legacy_shapes"] or []),
    }
    result.update({key: getattr(state, key) for key in _STATE_KEYS})
    result.update(
        segments=state.segment_count,
        blocks=state.block_count,
        trace_events=state.trace_event_count,
        allocator_settings=_json_value(meta["allocator_settings"]),
    )
    result["pools"] = pool_states(con, snapshot_id).to_dicts()
    result["devices"] = device_states(con, snapshot_id).to_dicts()
    result["top_sites"] = _top_sites(con, snapshot_id, top)
    suspects, basis = leak_judgement(con, snapshot_id, series=series)
    result["leak_suspects"] = _suspect_dicts(suspects, top)
    result["leak_basis"] = {"trace": basis.trace, "snapshots": basis.snapshots, "no_stack_bytes": basis.no_stack_bytes}
    result["series"] = series_dict(con, series, top)
    result["oom_events"] = [_oom_dict(m) for m in oom_moments(con, snapshot_id, device_total_bytes)]
    replay = timeline(con, snapshot_id)
    result["timeline"] = None if replay is None else {key: getattr(replay, key) for key in _TIMELINE_KEYS}
    if requested_bytes is not None:
        result["fit"] = asdict(would_fit(con, snapshot_id, requested_bytes))
    return result


def diff_snapshots(path_a: str | Path, path_b: str | Path, *, top: int = 20) -> dict[str, Any]:
    """What changed from snapshot A to snapshot B: per-site bytes and blocks, segments added and removed."""
    with scratch_database() as con:
        load_snapshot(con, path_a, 1)
        load_snapshot(con, path_b, 2)
        return diff_database(con, 1, 2, top=top)


def diff_database(con: duckdb.DuckDBPyConnection, before_id: int, after_id: int, *, top: int = 20) -> dict[str, Any]:
    """The `diff` dict for two snapshots already in a database."""
    before, after = snapshot_state(con, before_id), snapshot_state(con, after_id)
    sites = diff_sites(con, before_id, after_id).filter((pl.col("delta_bytes") != 0) | (pl.col("delta_blocks") != 0))
    segments = diff_segments(con, before_id, after_id)
    suspects = leak_judgement(con, after_id, series=[before_id, after_id])[0]
    return {
        "before": _side(con, before_id, before),
        "after": _side(con, after_id, after),
        "delta_allocated_bytes": after.allocated_bytes - before.allocated_bytes,
        "delta_reserved_bytes": after.reserved_bytes - before.reserved_bytes,
        "sites": sites.head(top).to_dicts(),
        "segments_added": segments.filter(pl.col("change") == "added").drop("change").to_dicts(),
        "segments_removed": segments.filter(pl.col("change") == "removed").drop("change").to_dicts(),
        "leak_suspects": _suspect_dicts(suspects, top),
    }


def _top_sites(con: duckdb.DuckDBPyConnection, snapshot_id: int, top: int) -> list[dict[str, Any]]:
    sites = allocation_sites(con, snapshot_id).head(top)
    return sites.select(
        "site",
        pl.col("live_bytes").alias("bytes"),
        pl.col("live_blocks").alias("blocks"),
        "requested_bytes",
        "share_of_allocated",
    ).to_dicts()


def _suspect_dicts(suspects: pl.DataFrame, top: int) -> list[dict[str, Any]]:
    return suspects.head(top).select(SUSPECT_COLUMNS).with_columns(pl.col("share_of_allocated").round(4)).to_dicts()


def _oom_dict(moment: Any) -> dict[str, Any]:
    fields = asdict(moment)
    return {
        key: fields[key]
        for key in (
            "time_us",
            "requested_bytes",
            "device_free_bytes",
            "reserved_unallocated_bytes",
            "largest_free_block_bytes",
            "cause",
            "explanation",
            "allocated_bytes",
            "reserved_bytes",
            "seq",
            "device",
        )
    }


def _json_value(text: str | None) -> Any:
    """A JSON column as Python data (DuckDB hands JSON to polars as text)."""
    return None if text is None else json.loads(text)


def _side(con: duckdb.DuckDBPyConnection, snapshot_id: int, state: Any) -> dict[str, Any]:
    path = con.sql(
        "SELECT path FROM stg_snapshots WHERE snapshot_id = $snapshot_id", params={"snapshot_id": snapshot_id}
    ).fetchall()[0][0]
    return {
        "path": path,
        "allocated_bytes": state.allocated_bytes,
        "reserved_bytes": state.reserved_bytes,
        "segments": state.segment_count,
        "blocks": state.block_count,
    }
