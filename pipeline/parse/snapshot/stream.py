"""The trace of a snapshot pickle columnarised as the streaming reader (_stream.c) hands it over, chunk by
chunk, and numbered exactly as a whole load numbers it (devices, seq, stack ids). The chunks are kept, or
handed to a TraceSink (the database) so that the trace is never held whole."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .limits import FRAME_COMPARISONS_PER_BYTE
from .safe_pickle import EndRead
from .stacks import Frame, StackInterner
from .trace import INT_KEYS, trace_tables


class StreamDeclined(Exception):
    """The streamed trace cannot be numbered as a whole load would number it: read the file whole."""


class TraceSink(Protocol):
    """Where a streamed trace's events go instead of memory (load.snapshot.TraceWriter: the database)."""

    def write(self, events: pa.Table) -> None:
        """One chunk of trace_events rows, final but for `device`, which holds the trace list's ordinal."""

    def finish(self, devices: list[int]) -> None:
        """Every chunk is written: `devices[ordinal]` is the device index of each streamed list."""

    def discard(self) -> None:
        """The stream was declined (the file is read whole instead): forget every chunk written."""


@dataclass(frozen=True)
class TraceSummary:
    """What the `snapshots` row says of a trace: its rows, time range and devices."""

    rows: int = 0
    first_time_us: int | None = None
    last_time_us: int | None = None
    devices: frozenset[int] = frozenset()

    @classmethod
    def of(cls, events: pa.Table) -> TraceSummary:
        if not events.num_rows:
            return cls()
        times = pc.min_max(events["time_us"]).as_py()
        devices = frozenset(pc.unique(events["device"]).to_pylist())
        return cls(events.num_rows, times["min"], times["max"], devices)

    def plus(self, other: TraceSummary) -> TraceSummary:
        return TraceSummary(
            self.rows + other.rows,
            _least(self.first_time_us, other.first_time_us, min),
            _least(self.last_time_us, other.last_time_us, max),
            self.devices | other.devices,
        )

    def on_devices(self, devices: list[int]) -> TraceSummary:
        """The summary with each list ordinal replaced by its device index."""
        return TraceSummary(
            self.rows, self.first_time_us, self.last_time_us, frozenset(devices[d] for d in self.devices)
        )


def _least(a: int | None, b: int | None, pick: Any) -> int | None:
    return b if a is None else a if b is None else pick(a, b)


@dataclass(frozen=True)
class Traces:
    """Trace tables built while streaming, and the interner that numbered their stacks; `events` is None
    where they went to a TraceSink."""

    events: pa.Table | None
    ooms: pa.Table
    interner: StackInterner
    summary: TraceSummary


class TraceChunks:
    """Columnarises trace entries as the streaming reader hands them over, in chunks of CHUNK_ENTRIES; the
    device column holds the trace list's ordinal until `tables` maps it to the device index."""

    # Entries held before they become columns: ~40 MB of entry dicts (about 640 bytes each with their
    # frames list), while each column pass still runs over enough entries to amortise its per-call cost.
    CHUNK_ENTRIES = 1 << 16

    def __init__(self, interner: StackInterner, name: str, sink: TraceSink | None = None) -> None:
        self.interner = interner
        self._name = name
        self._sink = sink
        self._pending: list[dict[str, Any]] = []
        self._pending_stacks: list[int] = []
        self._pending_columns: list[tuple[bytes | None, ...]] = []
        self._ordinal = 0
        self._seq = 0
        self._bytes_budgeted = 0
        self._events: list[pa.Table] = []
        self._ooms: list[pa.Table] = []
        self._summary = TraceSummary()

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
        self._summary = self._summary.plus(TraceSummary.of(events))
        self._ooms.append(ooms)
        if self._sink is None:
            self._events.append(events)
            return
        try:
            self._sink.write(events)
        except Exception as exc:  # why: the sink's failure is not the file's; reading it whole would hide it
            raise EndRead from exc

    def declined(self) -> None:
        """The file is read whole after all: the sink forgets what it was given."""
        if self._sink is not None and self._seq:
            self._sink.discard()

    def tables(self, devices: list[int]) -> Traces:
        """The trace tables, each row's device the index (in `device_traces`) of list `ordinal`."""
        self._flush()
        summary = self._summary.on_devices(devices)
        if not self._seq:
            events, ooms = trace_tables([], 0, 0, self.interner, self._name)
            return Traces(None if self._sink else events, ooms, self.interner, summary)
        ooms = _on_devices(pa.concat_tables(self._ooms), devices)
        self._ooms = []
        if self._sink is not None:
            self._sink.finish(devices)
            return Traces(None, ooms, self.interner, summary)
        # one action dictionary for all chunks, in the order a whole load meets the actions
        events = _on_devices(pa.concat_tables(self._events).unify_dictionaries(), devices)
        self._events = []
        return Traces(events, ooms, self.interner, summary)


def _joined(batches: list[tuple[bytes | None, ...]], k: int) -> np.ndarray | None:
    """Column `k` of every batch as one int64 array; None unless the reader gave it for every batch."""
    parts = [columns[k] for columns in batches]
    if any(part is None for part in parts):
        return None
    return np.frombuffer(b"".join(parts), np.int64)  # type: ignore[arg-type]


def _on_devices(table: pa.Table, devices: list[int]) -> pa.Table:
    """`table` with its `device` column (list ordinals) mapped to device indices."""
    if devices == list(range(len(devices))):
        return table
    index = table.schema.get_field_index("device")
    return table.set_column(index, "device", pc.take(pa.array(devices, pa.int32()), table["device"]))


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
