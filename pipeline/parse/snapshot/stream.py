"""The trace of a snapshot pickle columnarised as the streaming reader (_stream.c) hands it over, chunk by
chunk, and numbered exactly as a whole load numbers it (devices, seq, stack ids)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .limits import FRAME_COMPARISONS_PER_BYTE
from .stacks import Frame, StackInterner
from .trace import INT_KEYS, trace_tables


class StreamDeclined(Exception):
    """The streamed trace cannot be numbered as a whole load would number it: read the file whole."""


@dataclass(frozen=True)
class Traces:
    """Trace tables built while streaming, and the interner that numbered their stacks."""

    events: pa.Table
    ooms: pa.Table
    interner: StackInterner


class TraceChunks:
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
                raise StreamDeclined  # lists interleaved: seq numbers would not follow device order
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
        events, ooms = trace_tables(
            self._pending, self._ordinal, self._seq, self.interner, self._name, self._pending_stacks, ints
        )
        self._pending, self._pending_stacks, self._pending_columns = [], [], []
        self._seq += events.num_rows
        self._events.append(events)
        self._ooms.append(ooms)

    def tables(self, devices: list[int]) -> Traces:
        """The trace tables, each row's device the index (in `device_traces`) of list `ordinal`."""
        self._flush()
        if not self._events:
            events, ooms = trace_tables([], 0, 0, self.interner, self._name)
            return Traces(events, ooms, self.interner)
        # one action dictionary for all chunks, in the order a whole load meets the actions
        events, ooms = pa.concat_tables(self._events).unify_dictionaries(), pa.concat_tables(self._ooms)
        self._events, self._ooms = [], []
        if devices != list(range(len(devices))):
            device_of = pa.array(devices, pa.int32())
            events, ooms = (_set_device(t, device_of) for t in (events, ooms))
        return Traces(events, ooms, self.interner)


def _joined(batches: list[tuple[bytes | None, ...]], k: int) -> np.ndarray | None:
    """Column `k` of every batch as one int64 array; None unless the reader gave it for every batch."""
    parts = [columns[k] for columns in batches]
    if any(part is None for part in parts):
        return None
    return np.frombuffer(b"".join(parts), np.int64)  # type: ignore[arg-type]


def _set_device(table: pa.Table, device_of: pa.Array) -> pa.Table:
    index = table.schema.get_field_index("device")
    return table.set_column(index, "device", pc.take(device_of, table["device"]))


def devices_of(root: dict[str, Any], trace_lists: list[list[Any]]) -> list[int] | None:
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


def first_seen_order(interner: StackInterner, tables: tuple[pa.Table, ...]) -> list[int] | None:
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
