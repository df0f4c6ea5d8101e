"""A snapshot's trace entries as columns: one tight pass per column over a list of entry dicts."""

from __future__ import annotations

from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputError
from .limits import MAX_LABEL, bounded_text, int64_value, kind_of
from .stacks import StackInterner

# The integer fields of a trace entry, each an int64 column of trace_events, in the table's column order.
INT_KEYS = ("addr", "size", "stream", "time_us")


def trace_tables(
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
