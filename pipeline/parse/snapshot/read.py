"""Read a PyTorch memory snapshot (pickle or JSON, any compression) into columnar Arrow tables."""

from __future__ import annotations

import json
from collections.abc import Callable
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
from .limits import (
    FRAME_COMPARISONS_PER_BYTE,
    MAX_LABEL,
    Budget,
    JsonBudget,
    bounded_text,
    int64_value,
    kind_of,
    plain_json,
)
from .safe_pickle import failure_detail, gc_paused, load_plain_pickle_sized, read_start, stream_plain_pickle
from .segments import segment_tables
from .sniff import sniff_snapshot
from .stacks import Frame, StackInterner, stack_tables


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
    """The snapshot at `path` as tables; the raw object is dropped as soon as its columns are built. Every
    bound on the work (limits.Budget) is taken from the file's decompressed size."""
    name = str(path)
    if sniff_snapshot(read_start(path, 4096)) == "json":
        obj, size = _load_json(path)
        return snapshot_from_object(obj, name, "json", input_bytes=size)
    streamed = read_snapshot_streaming(path)
    if streamed is not None:
        return streamed
    obj, size = load_plain_pickle_sized(path)
    return snapshot_from_object(obj, name, "pickle", input_bytes=size)


def read_snapshot_streaming(path: str | Path) -> SnapshotData | None:
    """The snapshot read by the streaming reader, its trace columnarised chunk by chunk as it is read (so the
    trace's objects never exist all at once); None where that reader is not built or declines the file."""
    name = str(path)
    interner = StackInterner.empty(name, Budget.for_input(0))
    chunks = _TraceChunks(interner, name)
    with gc_paused():
        streamed = stream_plain_pickle(path, chunks.add, INT_KEYS)  # _StreamDeclined from chunks.add also ends as None
        if streamed is None:
            return None
        root, shapes = snapshot_root(streamed.root, name)
        devices = _devices_of(root, streamed.trace_lists)
        if devices is None:
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
    root: dict[str, Any], name: str, fmt: str, shapes: list[str], budget: Budget, traces: _Traces | None = None
) -> SnapshotData:
    """The tables of a loaded snapshot; `traces`: its trace tables and their interner where they were built
    while streaming (the segments' stacks are then interned after the trace's, and renumbered to the order
    in which a whole load would have met them)."""
    interner = StackInterner.empty(name, budget) if traces is None else traces.interner
    segments, blocks = segment_tables(_list(root["segments"], "segments", name), interner, name)
    if traces is None:
        trace_events, ooms = _all_traces(root, interner, name)
    else:
        trace_events, ooms = traces.events, traces.ooms
        order = _first_seen_order(interner, (blocks, segments, trace_events))
        if order is not None:
            segments, blocks, trace_events, ooms = (
                _remap_stacks(t, order) for t in (segments, blocks, trace_events, ooms)
            )
    remap = interner.merge_equal_stacks()
    if remap is not None:
        segments, blocks, trace_events, ooms = (_remap_stacks(t, remap) for t in (segments, blocks, trace_events, ooms))
    stacks = interner.stacks
    meta = _meta(root, name, fmt, shapes, (segments, blocks, trace_events), (ooms.num_rows, len(stacks)), budget)
    stacks_table, frames_table = stack_tables(stacks, name, budget)
    return SnapshotData(meta, segments, blocks, trace_events, stacks_table, frames_table, ooms)


# The integer fields of a trace entry, each an int64 column of trace_events, in the table's column order.
INT_KEYS = ("addr", "size", "stream", "time_us")


class _StreamDeclined(Exception):
    """The streamed trace cannot be numbered as a whole load would number it: read the file whole."""


@dataclass(frozen=True)
class _Traces:
    """Trace tables built while streaming, and the interner that numbered their stacks."""

    events: pa.Table
    ooms: pa.Table
    interner: StackInterner


class _TraceChunks:
    """Columnarises trace entries as the streaming reader hands them over, in chunks of CHUNK_ENTRIES; the
    device column holds the trace list's ordinal until `tables` maps it to the device index."""

    # Entries held before they become columns: ~40 MB of entry dicts (about 640 bytes each with their
    # frames list), while each column pass still runs over enough entries to amortise its per-call cost.
    CHUNK_ENTRIES = 1 << 16

    def __init__(self, interner: StackInterner, name: str) -> None:
        self.interner = interner
        self._name = name
        self._pending: list[dict[str, Any]] = []
        self._pending_stacks: list[int] = []
        self._pending_columns: list[tuple[bytes | None, ...]] = []
        self._ordinal = 0
        self._seq = 0
        self._bytes_budgeted = 0
        self._events: list[pa.Table] = []
        self._ooms: list[pa.Table] = []

    def add(
        self, ordinal: int, entries: list[dict[str, Any]], columns: tuple[bytes | None, ...], bytes_read: int
    ) -> list[list[Frame]]:
        """Take one batch of a trace list's entries and the reader's int64 columns of its INT_KEYS (None where
        the reader left a key to `_int_column`); `bytes_read` raises the stack interner's budget. Returns
        each entry's stack as the interner keeps it, for the reader to keep in place of the entry's frames list
        (a later entry may name the same list)."""
        if ordinal != self._ordinal:
            if ordinal < self._ordinal:
                raise _StreamDeclined  # lists interleaved: seq numbers would not follow device order
            self._flush()
            self._ordinal = ordinal
        self.budget_through(bytes_read)
        stack_ids = self.interner.intern_all(map(dict.get, entries, repeat("frames")))
        self._pending.extend(entries)
        self._pending_stacks.extend(stack_ids)
        self._pending_columns.append(columns)
        if len(self._pending) >= self.CHUNK_ENTRIES:
            self._flush()
        stacks = self.interner.stacks
        return [stacks[i] for i in stack_ids]

    def budget_through(self, bytes_read: int) -> None:
        """Raise the interner's comparison budget to what `bytes_read` bytes of input allow (Budget)."""
        self.interner.comparisons_left += FRAME_COMPARISONS_PER_BYTE * (bytes_read - self._bytes_budgeted)
        self._bytes_budgeted = bytes_read

    def _flush(self) -> None:
        if not self._pending:
            return
        ints = {key: _joined(self._pending_columns, k) for k, key in enumerate(INT_KEYS)}
        events, ooms = _trace_tables(
            self._pending, self._ordinal, self._seq, self.interner, self._name, self._pending_stacks, ints
        )
        self._pending, self._pending_stacks, self._pending_columns = [], [], []
        self._seq += events.num_rows
        self._events.append(events)
        self._ooms.append(ooms)

    def tables(self, devices: list[int]) -> _Traces:
        """The trace tables, each row's device the index (in `device_traces`) of list `ordinal`."""
        self._flush()
        if not self._events:
            events, ooms = _trace_tables([], 0, 0, self.interner, self._name)
            return _Traces(events, ooms, self.interner)
        # one action dictionary for all chunks, in the order a whole load meets the actions
        events, ooms = pa.concat_tables(self._events).unify_dictionaries(), pa.concat_tables(self._ooms)
        self._events, self._ooms = [], []
        if devices != list(range(len(devices))):
            device_of = pa.array(devices, pa.int32())
            events, ooms = (_set_device(t, device_of) for t in (events, ooms))
        return _Traces(events, ooms, self.interner)


def _joined(batches: list[tuple[bytes | None, ...]], k: int) -> np.ndarray | None:
    """Column `k` of every batch as one int64 array; None unless the reader gave it for every batch."""
    parts = [columns[k] for columns in batches]
    if any(part is None for part in parts):
        return None
    return np.frombuffer(b"".join(parts), np.int64)  # type: ignore[arg-type]


def _set_device(table: pa.Table, device_of: pa.Array) -> pa.Table:
    index = table.schema.get_field_index("device")
    return table.set_column(index, "device", pc.take(device_of, table["device"]))


def _devices_of(root: dict[str, Any], trace_lists: list[list[Any]]) -> list[int] | None:
    """The device index of each streamed trace list (its place in `device_traces`); None unless every
    streamed list is there and every other device's list is empty (a list the reader did not stream holds
    entries that are not trace entries: the whole load names what is wrong with them)."""
    traces = root.get("device_traces") or []
    if type(traces) is not list:
        return None
    place = {id(trace): device for device, trace in enumerate(traces)}
    devices = [place.get(id(trace), -1) for trace in trace_lists]
    streamed = set(map(id, trace_lists))
    if -1 in devices or any(trace and id(trace) not in streamed for trace in traces):
        return None
    return devices


def _first_seen_order(interner: StackInterner, tables: tuple[pa.Table, ...]) -> list[int] | None:
    """Renumber stacks in the order their first row appears across `tables` (blocks, segments, trace: the
    order a whole load interns them), reordering the interner's stacks; the old-id -> new-id map, or None
    when the numbering is already that order."""
    ids = pa.chunked_array([chunk for t in tables for chunk in t["stack_id"].chunks], pa.int32())
    order = pc.unique(ids).to_pylist()
    if order == list(range(len(order))):
        return None
    remap = [0] * len(interner.stacks)
    for new_id, old_id in enumerate(order):
        remap[old_id] = new_id
    interner.stacks[:] = [interner.stacks[old_id] for old_id in order]
    return remap


def _list(value: object, key: str, name: str) -> list[Any]:
    if type(value) is not list:
        raise InputError(name, f"not a PyTorch memory snapshot: '{key}' is {kind_of(value)}, not a list")
    return value


def _all_traces(root: dict[str, Any], interner: StackInterner, name: str) -> tuple[pa.Table, pa.Table]:
    """Trace events of every device, seq numbered across devices; each device's list is freed once read."""
    traces = _list(root.get("device_traces") or [], "device_traces", name)
    events, ooms, first_seq = [], [], 0
    for device in range(len(traces)):
        entries = _list(traces[device] or [], "device_traces", name)
        traces[device] = None  # why: the entries are freed when `entries` goes, not at the end of the read
        device_events, device_ooms = _trace_tables(entries, device, first_seq, interner, name)
        del entries
        events.append(device_events)
        ooms.append(device_ooms)
        first_seq += device_events.num_rows
    if not events:
        return _trace_tables([], 0, 0, interner, name)
    return pa.concat_tables(events), pa.concat_tables(ooms)


def _trace_tables(
    entries: list[dict[str, Any]],
    device: int,
    first_seq: int,
    interner: StackInterner,
    name: str,
    stack_ids: list[int] | None = None,
    ints: dict[str, np.ndarray | None] | None = None,
) -> tuple[pa.Table, pa.Table]:
    """The trace events of one device, one tight pass per column, and its `oom` entries; `stack_ids`: the
    entries' stacks where they were interned already; `ints`: INT_KEYS columns already built (None: read
    from the entries)."""
    ints = ints or {}
    if stack_ids is None:
        stack_ids = interner.intern_all(map(dict.get, entries, repeat("frames")))
    count = len(entries)
    action = _action_column(entries, name)
    columns = {
        "device": pa.array(np.full(count, device, np.int32)),
        "seq": pa.array(np.arange(first_seq, first_seq + count, dtype=np.int64)),
        "action": action,
        **{key: _int_column(entries, key, name, ints.get(key)) for key in INT_KEYS},
        "stack_id": pa.array(stack_ids, pa.int32()),
    }
    events = pa.table(columns)
    return events, _oom_table(entries, events, name)


def _action_column(entries: list[dict[str, Any]], name: str) -> pa.DictionaryArray:
    """Actions as a dictionary array: a handful of distinct strings over millions of rows. Each must be text:
    anything else is refused before it is hashed (hashing a shared tuple is exponential in its depth)."""
    actions = list(map(dict.get, entries, repeat("action")))
    if actions and set(map(type, actions)) != {str}:
        bad = next(a for a in actions if type(a) is not str)
        raise InputError(name, f"not a PyTorch memory snapshot: a trace entry's 'action' is {kind_of(bad)}, not text")
    codes: dict[object, int] = _Codes()
    indices = pa.array(map(codes.__getitem__, actions), pa.int32(), size=len(entries))
    names = pa.array([bounded_text(action, MAX_LABEL) for action in codes], pa.string())  # type: ignore[arg-type]
    return pa.DictionaryArray.from_arrays(indices, names)


class _Codes(dict):  # type: ignore[type-arg]
    """A dict that numbers new keys in the order it meets them."""

    def __missing__(self, key: object) -> int:
        code = self[key] = len(self)
        return code


def _int_column(entries: list[dict[str, Any]], key: str, name: str, built: np.ndarray | None = None) -> pa.Array:
    """An int64 column (`built` where the streaming reader made it); the fast path needs the key in every
    entry, the slow one allows gaps (nulls) and names the first value that is not an integer (never printing
    it: pyarrow's message would repr it)."""
    if built is not None:
        return pa.array(built)
    try:
        return pa.array(np.fromiter(map(itemgetter(key), entries), np.int64, count=len(entries)))
    except (KeyError, TypeError, ValueError, OverflowError):
        where = "a trace entry's"
        values = [int64_value(v, key, where, name) for v in map(dict.get, entries, repeat(key))]
        return pa.array(values, pa.int64(), size=len(entries))


def _oom_table(entries: list[dict[str, Any]], events: pa.Table, name: str) -> pa.Table:
    """One row per `oom` entry: the request, and what cudaMemGetInfo said was free on the device."""
    rows = rows_with_action(events["action"], "oom")
    ooms = events.take(pa.array(rows, pa.int64())).select(["device", "seq", "time_us", "size", "stream", "stack_id"])
    where = "an oom entry's"
    free = pa.array([int64_value(entries[i].get("device_free"), "device_free", where, name) for i in rows], pa.int64())
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
    counts: tuple[int, int],
    budget: Budget,
) -> SnapshotMeta:
    """Totals and labels of the snapshot, from its tables and the few top-level keys. The settings and
    annotations are copied as plain JSON within the budget (they are serialised later, and a shared list
    nested 60 deep would serialise to 2^60 items)."""
    segments, blocks, events = tables
    oom_count, stack_count = counts
    json_budget = JsonBudget(budget)
    settings = root.get("allocator_settings")
    settings = plain_json(settings, "allocator_settings", name, json_budget) if isinstance(settings, dict) else None
    annotations = plain_json(root.get("external_annotations") or [], "external_annotations", name, json_budget)
    times = pc.min_max(events["time_us"]).as_py() if events.num_rows else {"min": None, "max": None}
    expandable = bool(pc.any(segments["is_expandable"]).as_py()) or bool((settings or {}).get("expandable_segments"))
    state = blocks["state"]
    return SnapshotMeta(
        path=name,
        format=fmt,
        legacy_shapes=tuple(shapes),
        devices=tuple(sorted(set(segments["device"].to_pylist()) | set(pc.unique(events["device"]).to_pylist()))),
        allocator_settings=settings,
        external_annotations=tuple(annotations) if isinstance(annotations, list) else (annotations,),
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
