"""Read a PyTorch memory snapshot (pickle or JSON, any compression) into columnar Arrow tables."""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputError
from ..compression import open_binary
from .legacy import snapshot_root
from .safe_pickle import gc_paused, load_plain_pickle, read_start
from .segments import segment_tables
from .sniff import sniff_snapshot
from .stacks import StackInterner, frames_table, stacks_table


@dataclass(frozen=True)
class SnapshotMeta:
    """One snapshot file: where it came from, how it was written, its totals and time range."""

    path: str
    format: str
    legacy_shapes: tuple[str, ...]
    devices: tuple[int, ...]
    allocator_settings: dict[str, Any] | None
    external_annotations: tuple[Any, ...]
    expandable_segments: bool
    first_time_us: int | None
    last_time_us: int | None
    segment_count: int
    block_count: int
    trace_event_count: int
    oom_count: int
    stack_count: int
    allocated_bytes: int
    active_bytes: int
    reserved_bytes: int
    requested_bytes: int

    @property
    def alloc_conf(self) -> str | None:
        """PYTORCH_CUDA_ALLOC_CONF as the process saw it, when the snapshot records it."""
        value = (self.allocator_settings or {}).get("PYTORCH_CUDA_ALLOC_CONF")
        return None if value is None else str(value)


@dataclass(frozen=True)
class SnapshotData:
    """A snapshot as tables: segments, blocks, trace_events, stacks, frames and ooms (see docs)."""

    meta: SnapshotMeta
    segments: pa.Table
    blocks: pa.Table
    trace_events: pa.Table
    stacks: pa.Table
    frames: pa.Table
    ooms: pa.Table


def read_snapshot(path: str | Path) -> SnapshotData:
    """The snapshot at `path` as tables; the raw object is dropped as soon as its columns are built."""
    name = str(path)
    if sniff_snapshot(read_start(path, 4096)) == "json":
        return snapshot_from_object(_load_json(path), name, "json")
    return snapshot_from_object(load_plain_pickle(path), name, "pickle")


def snapshot_from_object(obj: object, name: str, fmt: str = "pickle") -> SnapshotData:
    """Columnarise a loaded snapshot. Consumes `obj`: its trace lists are emptied while being read."""
    with gc_paused():
        root, shapes = snapshot_root(obj, name)
        del obj
        try:
            return _columnarise(root, name, fmt, shapes)
        except InputError:
            raise
        except (TypeError, ValueError, KeyError, OverflowError, AttributeError, pa.ArrowException) as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(name, f"not a PyTorch memory snapshot: malformed content ({detail})") from exc


def _load_json(path: str | Path) -> object:
    """The JSON form of a snapshot (frames are not shared there; interning merges them by content)."""
    try:
        with open_binary(path) as stream, gc_paused():
            return json.load(stream)
    except (ValueError, EOFError, OSError) as exc:
        raise InputError(str(path), f"not a readable JSON snapshot: {exc}") from exc


def _columnarise(root: dict[str, Any], name: str, fmt: str, shapes: list[str]) -> SnapshotData:
    interner = StackInterner.empty()
    segments, blocks = segment_tables(root["segments"], interner)
    trace_events, ooms = _all_traces(root, interner)
    remap = interner.merge_equal_stacks()
    if remap is not None:
        segments, blocks, trace_events, ooms = (_remap_stacks(t, remap) for t in (segments, blocks, trace_events, ooms))
    stacks = interner.stacks
    meta = _meta(root, name, fmt, shapes, (segments, blocks, trace_events), ooms.num_rows, len(stacks))
    return SnapshotData(meta, segments, blocks, trace_events, stacks_table(stacks), frames_table(stacks), ooms)


def _all_traces(root: dict[str, Any], interner: StackInterner) -> tuple[pa.Table, pa.Table]:
    """Trace events of every device, seq numbered across devices; each device's list is freed once read."""
    traces = root.get("device_traces") or []
    events, ooms, first_seq = [], [], 0
    for device in range(len(traces)):
        entries = traces[device] or []
        traces[device] = None  # why: the entries are freed when `entries` goes, not at the end of the read
        device_events, device_ooms = _trace_tables(entries, device, first_seq, interner)
        del entries
        events.append(device_events)
        ooms.append(device_ooms)
        first_seq += device_events.num_rows
    if not events:
        return _trace_tables([], 0, 0, interner)
    return pa.concat_tables(events), pa.concat_tables(ooms)


def _trace_tables(
    entries: list[dict[str, Any]], device: int, first_seq: int, interner: StackInterner
) -> tuple[pa.Table, pa.Table]:
    """The trace events of one device, one tight pass per column, and its `oom` entries."""
    count = len(entries)
    action = _action_column(entries)
    columns = {
        "device": pa.array(np.full(count, device, np.int32)),
        "seq": pa.array(np.arange(first_seq, first_seq + count, dtype=np.int64)),
        "action": action,
        "addr": _int_column(entries, "addr"),
        "size": _int_column(entries, "size"),
        "stream": _int_column(entries, "stream"),
        "time_us": _int_column(entries, "time_us"),
        "stack_id": pa.array(interner.intern_all(map(dict.get, entries, repeat("frames"))), pa.int32()),
    }
    events = pa.table(columns)
    return events, _oom_table(entries, events)


def _action_column(entries: list[dict[str, Any]]) -> pa.DictionaryArray:
    """Actions as a dictionary array: a handful of distinct strings over millions of rows."""
    codes: dict[object, int] = _Codes()
    indices = pa.array(map(codes.__getitem__, map(dict.get, entries, repeat("action"))), pa.int32(), size=len(entries))
    names = pa.array([str(name) for name in codes], pa.string())
    return pa.DictionaryArray.from_arrays(indices, names)


class _Codes(dict):  # type: ignore[type-arg]
    """A dict that numbers new keys in the order it meets them."""

    def __missing__(self, key: object) -> int:
        code = self[key] = len(self)
        return code


def _int_column(entries: list[dict[str, Any]], key: str) -> pa.Array:
    """An int64 column; the fast path needs the key in every entry, the slow one allows gaps (nulls)."""
    try:
        return pa.array(np.fromiter(map(itemgetter(key), entries), np.int64, count=len(entries)))
    except (KeyError, TypeError):
        return pa.array(map(dict.get, entries, repeat(key)), pa.int64(), size=len(entries))


def _oom_table(entries: list[dict[str, Any]], events: pa.Table) -> pa.Table:
    """One row per `oom` entry: the request, and what cudaMemGetInfo said was free on the device."""
    rows = rows_with_action(events["action"], "oom")
    ooms = events.take(pa.array(rows, pa.int64())).select(["device", "seq", "time_us", "size", "stream", "stack_id"])
    free = pa.array([entries[i].get("device_free") for i in rows], pa.int64())
    return ooms.rename_columns(["device", "seq", "time_us", "requested_bytes", "stream", "stack_id"]).append_column(
        "device_free_bytes", free
    )


def rows_with_action(action: pa.ChunkedArray | pa.DictionaryArray, name: str) -> list[int]:
    """Row numbers whose action is `name`, compared on the dictionary codes rather than strings."""
    rows: list[int] = []
    chunks = action.chunks if isinstance(action, pa.ChunkedArray) else [action]
    offset = 0
    for chunk in chunks:
        codes = [i for i, value in enumerate(chunk.dictionary.to_pylist()) if value == name]
        if codes:
            hits = pc.indices_nonzero(pc.is_in(chunk.indices, pa.array(codes, chunk.indices.type)))
            rows.extend(offset + i for i in hits.to_pylist())
        offset += len(chunk)
    return rows


def _remap_stacks(table: pa.Table, remap: list[int]) -> pa.Table:
    """Replace stack ids by their canonical (content-equal) ids."""
    index = table.schema.get_field_index("stack_id")
    mapped = pc.take(pa.array(remap, pa.int32()), table["stack_id"])
    return table.set_column(index, "stack_id", mapped)


def _meta(
    root: dict[str, Any],
    name: str,
    fmt: str,
    shapes: list[str],
    tables: tuple[pa.Table, pa.Table, pa.Table],
    oom_count: int,
    stack_count: int,
) -> SnapshotMeta:
    """Totals and labels of the snapshot, from its tables and the few top-level keys."""
    segments, blocks, events = tables
    settings = root.get("allocator_settings")
    settings = settings if isinstance(settings, dict) else None
    times = pc.min_max(events["time_us"]).as_py() if events.num_rows else {"min": None, "max": None}
    expandable = bool(pc.any(segments["is_expandable"]).as_py()) or bool((settings or {}).get("expandable_segments"))
    state = blocks["state"]
    return SnapshotMeta(
        path=name,
        format=fmt,
        legacy_shapes=tuple(shapes),
        devices=tuple(sorted(set(segments["device"].to_pylist()) | set(pc.unique(events["device"]).to_pylist()))),
        allocator_settings=settings,
        external_annotations=tuple(root.get("external_annotations") or ()),
        expandable_segments=expandable,
        first_time_us=times["min"],
        last_time_us=times["max"],
        segment_count=segments.num_rows,
        block_count=blocks.num_rows,
        trace_event_count=events.num_rows,
        oom_count=oom_count,
        stack_count=stack_count,
        allocated_bytes=_sum_where(blocks["size"], pc.equal(state, "active_allocated")),
        active_bytes=_sum_where(blocks["size"], pc.not_equal(state, "inactive")),
        reserved_bytes=int(pc.sum(segments["total_size"]).as_py() or 0),
        requested_bytes=_sum_where(blocks["requested_size"], pc.equal(state, "active_allocated")),
    )


def _sum_where(values: pa.ChunkedArray, mask: pa.ChunkedArray) -> int:
    return int(pc.sum(pc.filter(values, mask)).as_py() or 0)
