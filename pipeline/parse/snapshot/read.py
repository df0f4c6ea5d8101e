"""Read a PyTorch memory snapshot (pickle or JSON, any compression) into columnar Arrow tables."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputError
from ..compression import open_binary
from .legacy import snapshot_root
from .limits import Budget, JsonBudget, kind_of, plain_json
from .safe_pickle import EndRead, failure_detail, gc_paused, load_plain_pickle_sized, read_start, stream_plain_pickle
from .segments import segment_tables
from .sniff import sniff_snapshot
from .stacks import StackInterner, stack_tables
from .stream import TraceChunks, Traces, TraceSink, TraceSummary, devices_of
from .trace import INT_KEYS, trace_tables


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
    """A snapshot as tables: segments, blocks, trace_events, stacks, frames and ooms (see docs);
    `trace_events` is None where the trace was streamed into a TraceSink instead."""

    meta: SnapshotMeta
    segments: pa.Table
    blocks: pa.Table
    trace_events: pa.Table | None
    stacks: pa.Table
    frames: pa.Table
    ooms: pa.Table


def read_snapshot(path: str | Path, trace_sink: TraceSink | None = None) -> SnapshotData:
    """The snapshot at `path` as tables; the raw object is dropped as soon as its columns are built. Every
    bound on the work (limits.Budget) is taken from the file's decompressed size. With `trace_sink`, a trace
    the streaming reader takes goes there chunk by chunk (and `trace_events` is None); a file read whole
    keeps its trace in `trace_events`."""
    name = str(path)
    if sniff_snapshot(read_start(path, 4096)) == "json":
        obj, size = _load_json(path)
        return snapshot_from_object(obj, name, "json", input_bytes=size)
    streamed = read_snapshot_streaming(path, trace_sink)
    if streamed is not None:
        return streamed
    obj, size = load_plain_pickle_sized(path)
    return snapshot_from_object(obj, name, "pickle", input_bytes=size)


def read_snapshot_streaming(path: str | Path, trace_sink: TraceSink | None = None) -> SnapshotData | None:
    """The snapshot read by the streaming reader, its trace columnarised chunk by chunk as it is read (so the
    trace's objects never exist all at once), into `trace_sink` where given; None where that reader is not
    built or declines the file (the sink has then forgotten what it was given)."""
    try:
        return _read_streaming(path, trace_sink)
    except EndRead as exc:  # the sink failed: its own error, not this file's
        raise exc.__cause__ or exc from None


def _read_streaming(path: str | Path, trace_sink: TraceSink | None) -> SnapshotData | None:
    name = str(path)
    interner = StackInterner.empty(name, Budget.for_input(0))
    chunks = TraceChunks(interner, name, trace_sink)
    with gc_paused():
        streamed = stream_plain_pickle(path, chunks.add, INT_KEYS)  # StreamDeclined from chunks.add also ends as None
        devices = None
        if streamed is not None:
            root, shapes = snapshot_root(streamed.root, name)
            devices = devices_of(root, streamed.trace_lists)
        if streamed is None or devices is None:
            chunks.declined()
            return None
        chunks.budget_through(streamed.input_bytes)  # the segments are interned next, with the whole file's budget
        traces = chunks.tables(devices)
        return _guarded(
            name, lambda: _columnarise(root, name, "pickle", shapes, Budget.for_input(streamed.input_bytes), traces)
        )


def snapshot_from_object(
    obj: object, name: str, fmt: str = "pickle", *, input_bytes: int | None = None
) -> SnapshotData:
    """Columnarise a loaded snapshot. Consumes `obj`: its trace lists are emptied while being read, frame
    text longer than limits.MAX_TEXT is cut in place. `input_bytes`: the decompressed size of the file it
    came from, which bounds the work (an object built in memory gets the bounds of a 256 MiB file)."""
    with gc_paused():
        root, shapes = snapshot_root(obj, name)
        del obj
        return _guarded(name, lambda: _columnarise(root, name, fmt, shapes, Budget.for_input(input_bytes)))


def _guarded(name: str, work: Callable[[], SnapshotData]) -> SnapshotData:
    """`work()`, any failure of malformed content turned into this file's one-line InputError."""
    try:
        return work()
    except InputError:
        raise
    except RecursionError as exc:
        raise InputError(name, "not a PyTorch memory snapshot: it nests deeper than can be walked") from exc
    except MemoryError as exc:
        raise InputError(
            name, "not a PyTorch memory snapshot: its tables need more memory than this machine has"
        ) from exc
    except (TypeError, ValueError, KeyError, IndexError, OverflowError, AttributeError, pa.ArrowException) as exc:
        raise InputError(name, f"not a PyTorch memory snapshot: malformed content ({failure_detail(exc)})") from exc


def _load_json(path: str | Path) -> tuple[object, int]:
    """The JSON form of a snapshot (frames are not shared there; interning merges them by content), and the
    size of its text."""
    try:
        with open_binary(path) as stream, gc_paused():
            text = stream.read()
            return json.loads(text), len(text)
    except RecursionError as exc:
        raise InputError(str(path), "not a readable JSON snapshot: it nests deeper than can be walked") from exc
    except (ValueError, EOFError, OSError, MemoryError) as exc:
        raise InputError(str(path), f"not a readable JSON snapshot: {failure_detail(exc)}") from exc


def _columnarise(
    root: dict[str, Any], name: str, fmt: str, shapes: list[str], budget: Budget, traces: Traces | None = None
) -> SnapshotData:
    """The tables of a loaded snapshot; `traces`: its trace tables and their interner where they were built
    while streaming. The trace's stacks are interned before the segments' in both cases, so a streamed file
    and the same file read whole number their stacks alike."""
    if traces is None:
        traces = _all_traces(root, StackInterner.empty(name, budget), name)
    segments, blocks = segment_tables(_list(root["segments"], "segments", name), traces.interner, name)
    stacks = traces.interner.stacks
    counts = (traces.ooms.num_rows, len(stacks))
    meta = _meta(root, name, fmt, shapes, (segments, blocks), traces.summary, counts, budget)
    stacks_table, frames_table = stack_tables(stacks, name, budget)
    return SnapshotData(meta, segments, blocks, traces.events, stacks_table, frames_table, traces.ooms)


def _list(value: object, key: str, name: str) -> list[Any]:
    if type(value) is not list:
        raise InputError(name, f"not a PyTorch memory snapshot: '{key}' is {kind_of(value)}, not a list")
    return value


def _all_traces(root: dict[str, Any], interner: StackInterner, name: str) -> Traces:
    """Trace events of every device, seq numbered across devices; each device's list is freed once read."""
    traces = _list(root.get("device_traces") or [], "device_traces", name)
    events, ooms, first_seq = [], [], 0
    for device in range(len(traces)):
        entries = _list(traces[device] or [], "device_traces", name)
        traces[device] = None  # why: the entries are freed when `entries` goes, not at the end of the read
        device_events, device_ooms = trace_tables(entries, device, first_seq, interner, name)
        del entries
        events.append(device_events)
        ooms.append(device_ooms)
        first_seq += device_events.num_rows
    if not events:
        all_events, all_ooms = trace_tables([], 0, 0, interner, name)
    else:
        all_events, all_ooms = pa.concat_tables(events), pa.concat_tables(ooms)
    return Traces(all_events, all_ooms, interner, TraceSummary.of(all_events))


def _meta(
    root: dict[str, Any],
    name: str,
    fmt: str,
    shapes: list[str],
    tables: tuple[pa.Table, pa.Table],
    trace: TraceSummary,
    counts: tuple[int, int],
    budget: Budget,
) -> SnapshotMeta:
    """Totals and labels of the snapshot, from its tables and the few top-level keys. The settings and
    annotations are copied as plain JSON within the budget (they are serialised later, and a shared list
    nested 60 deep would serialise to 2^60 items)."""
    segments, blocks = tables
    oom_count, stack_count = counts
    json_budget = JsonBudget(budget)
    settings = root.get("allocator_settings")
    settings = plain_json(settings, "allocator_settings", name, json_budget) if isinstance(settings, dict) else None
    annotations = plain_json(root.get("external_annotations") or [], "external_annotations", name, json_budget)
    expandable = bool(pc.any(segments["is_expandable"]).as_py()) or bool((settings or {}).get("expandable_segments"))
    state = blocks["state"]
    return SnapshotMeta(
        path=name,
        format=fmt,
        legacy_shapes=tuple(shapes),
        devices=tuple(sorted(set(segments["device"].to_pylist()) | trace.devices)),
        allocator_settings=settings,
        external_annotations=tuple(annotations) if isinstance(annotations, list) else (annotations,),
        expandable_segments=expandable,
        first_time_us=trace.first_time_us,
        last_time_us=trace.last_time_us,
        segment_count=segments.num_rows,
        block_count=blocks.num_rows,
        trace_event_count=trace.rows,
        oom_count=oom_count,
        stack_count=stack_count,
        allocated_bytes=_sum_where(blocks["size"], pc.equal(state, "active_allocated")),
        active_bytes=_sum_where(blocks["size"], pc.not_equal(state, "inactive")),
        reserved_bytes=int(pc.sum(segments["total_size"]).as_py() or 0),
        requested_bytes=_sum_where(blocks["requested_size"], pc.equal(state, "active_allocated")),
    )


def _sum_where(values: pa.ChunkedArray, mask: pa.ChunkedArray) -> int:
    return int(pc.sum(pc.filter(values, mask)).as_py() or 0)
