"""Derive a large snapshot pickle FROM A REAL ONE without holding it: each device's trace repeated `copies`
times, copy k's times shifted k spans past the first, every copy with its own entry dicts and frames lists and
the frame dicts shared, as torch writes them (protocol 4, memoized, framed every 64 KiB).

    python bench/derive_snapshot.py SOURCE OUT --copies 20

Building the copies as objects and pickling them needs about 6x the file in memory (a 5 GB file would not
fit here), so the trace is written opcode by opcode, from one entry at a time; everything else (segments,
settings) is the source's own pickle, copied op by op. The derived trace is not a consistent allocator
history; it measures size.
"""

from __future__ import annotations

import argparse
import pickle
import pickletools
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

_FRAME_SIZE = 64 << 10  # what the C pickler frames at
_MARKER = "oomlab-derive-splice-{}"


class _Writer:
    """Protocol-4 opcodes with the pickler's memo (objects by identity, strings by value) and framing."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._frame = bytearray()
        self._memo: dict[object, int] = {}  # id(obj) or ("str", text) -> memo index
        self._keep: list[object] = []  # objects memoized by id stay alive, so ids stay unique
        self.memo_count = 0

    def raw(self, data: bytes) -> None:
        self._frame += data
        if len(self._frame) >= _FRAME_SIZE:
            self.commit()

    def commit(self) -> None:
        if self._frame:
            self._out.write(pickle.FRAME + struct.pack("<Q", len(self._frame)) + self._frame)
            self._frame = bytearray()

    def memoize(self, key: object = None, keep: object = None) -> None:
        """MEMOIZE the object just written; `key` names it for later references (None: never named again)."""
        if key is not None:
            self._memo[key] = self.memo_count
        if keep is not None:
            self._keep.append(keep)
        self.memo_count += 1
        self._frame += pickle.MEMOIZE

    def get(self, key: object) -> bytes | None:
        index = self._memo.get(key)
        return None if index is None else _get(index)

    def value(self, value: Any) -> bytes | None:
        """The opcodes of a scalar (None, bool, int, float, str); None for a container. A string met for the
        first time is written and memoized here, and b"" returned: nothing is left to write."""
        kind = type(value)
        if kind is str:
            known = self.get(("str", value))
            if known is not None:
                return known
            data = value.encode("utf-8", "surrogatepass")
            head = (
                pickle.SHORT_BINUNICODE + bytes([len(data)]) if len(data) < 256 else b"X" + struct.pack("<I", len(data))
            )
            self.raw(head + data)
            self.memoize(("str", value))
            return b""
        if kind is int:
            if 0 <= value < 256:
                return pickle.BININT1 + bytes([value])
            if 0 <= value < 65536:
                return pickle.BININT2 + struct.pack("<H", value)
            if -(1 << 31) <= value < (1 << 31):
                return pickle.BININT + struct.pack("<i", value)
            encoded = pickle.encode_long(value)
            return pickle.LONG1 + bytes([len(encoded)]) + encoded
        if kind is float:
            return pickle.BINFLOAT + struct.pack(">d", value)
        if value is None:
            return pickle.NONE
        if kind is bool:
            return pickle.NEWTRUE if value else pickle.NEWFALSE
        return None

    def write(self, value: Any) -> None:
        """Any plain value; dicts and lists memoized by identity the first time, named by memo after."""
        scalar = self.value(value)
        if scalar is not None:
            self.raw(scalar)
            return
        known = self.get(id(value))
        if known is not None:
            self.raw(known)
            return
        if type(value) is dict:
            self.raw(pickle.EMPTY_DICT)
            self.memoize(id(value), value)
            if value:
                self.raw(pickle.MARK)
                for key, item in value.items():
                    self.write(key)
                    self.write(item)
                self.raw(pickle.SETITEMS)
        elif type(value) is list:
            self.list_of(value, memo_key=id(value), keep=value)
        else:
            raise TypeError(f"derive_snapshot writes plain dicts, lists and scalars, not {type(value).__name__}")

    def list_of(self, items: list[Any] | Iterator[Any], memo_key: object = None, keep: object = None) -> None:
        """A list, its items appended in batches of 1,000 as the pickler does; memoized under `memo_key`."""
        self.raw(pickle.EMPTY_LIST)
        self.memoize(memo_key, keep)
        batch: list[Any] = []
        for item in items:
            batch.append(item)
            if len(batch) == 1000:
                self._appends(batch)
                batch = []
        if batch:
            self._appends(batch)

    def _appends(self, batch: list[Any]) -> None:
        if len(batch) == 1:
            self.write(batch[0])
            self.raw(pickle.APPEND)
            return
        self.raw(pickle.MARK)
        for item in batch:
            self.write(item)
        self.raw(pickle.APPENDS)


_TIME, _FRAMES = object(), object()


class _TraceWriter:
    """Writes copies of one trace. Copy 0 goes through the generic writer, which memoizes every string, frame
    dict and frames list; from then on each entry is a template (its bytes with slots for its time and its
    frames list), so copies 1..n cost a few byte joins per entry. In every copy the entries that share a
    frames list in the source share one new list, as torch writes a block's alloc and free."""

    def __init__(self, writer: _Writer) -> None:
        self._w = writer
        self._templates: list[list[object] | None] = []
        self._bodies: dict[int, bytes] = {}  # id(source frames list) -> its items' opcodes
        self._lists: dict[int, int] = {}  # id(source frames list) -> memo index of its copy in this copy

    def first_copy(self, index: int, entry: dict[str, Any]) -> None:
        w = self._w
        w.raw(pickle.EMPTY_DICT)
        w.memoize()
        w.raw(pickle.MARK)
        for key, item in entry.items():
            w.write(key)
            w.write(item)
        w.raw(pickle.SETITEMS)
        self._templates.append(self._template(entry))

    def _template(self, entry: dict[str, Any]) -> list[object] | None:
        """The entry as bytes and slots, once everything it names is memoized; None: written generically."""
        parts: list[object] = [pickle.EMPTY_DICT + pickle.MEMOIZE + pickle.MARK]
        for key, item in entry.items():
            key_bytes = self._w.value(key)
            if not key_bytes:
                return None
            parts.append(key_bytes)
            if key == "time_us" and type(item) is int:
                parts.append(_TIME)
            elif key == "frames" and type(item) is list:
                body = self._body(item)
                if body is None:
                    return None
                parts.append((_FRAMES, id(item), body))
            else:
                value = self._w.value(item)
                if not value:
                    return None
                parts.append(value)
        parts.append(pickle.SETITEMS)
        return parts

    def _body(self, frames: list[Any]) -> bytes | None:
        """The opcodes that fill a copy of `frames` (its frame dicts by memo); None if one is not memoized."""
        body = self._bodies.get(id(frames))
        if body is None:
            gets = [self._w.get(id(frame)) for frame in frames]
            if None in gets:
                return None
            if len(gets) == 1:
                body = gets[0] + pickle.APPEND
            else:
                body = (pickle.MARK + b"".join(gets) + pickle.APPENDS) if gets else b""
            self._bodies[id(frames)] = body
        return body

    def start_copy(self) -> None:
        self._lists = {}

    def later_copy(self, index: int, entry: dict[str, Any], time_us: int | None) -> None:
        """Entry `index` of the source again, `time_us` replaced, from its template."""
        template = self._templates[index]
        w = self._w
        if template is None:
            w.raw(pickle.EMPTY_DICT)
            w.memoize()
            w.raw(pickle.MARK)
            for key, item in entry.items():
                w.write(key)
                w.write(time_us if key == "time_us" and time_us is not None else item)
            w.raw(pickle.SETITEMS)
            return
        out: list[bytes] = []
        memos = 1  # the entry dict's own MEMOIZE, in the template's first part
        for part in template:
            if part is _TIME:
                out.append(w.value(time_us) or b"")
            elif type(part) is tuple:
                _, key, body = part
                known = self._lists.get(key)
                if known is None:
                    self._lists[key] = w.memo_count + memos
                    memos += 1
                    out.append(pickle.EMPTY_LIST + pickle.MEMOIZE + body)
                else:
                    out.append(_get(known))
            else:
                out.append(part)  # type: ignore[arg-type]
        w.memo_count += memos
        w.raw(b"".join(out))


def _get(index: int) -> bytes:
    return pickle.BINGET + bytes([index]) if index < 256 else pickle.LONG_BINGET + struct.pack("<I", index)


def derive(source: Any, out: BinaryIO, copies: int) -> None:
    """Write `source` (a loaded snapshot dict) with each device's trace repeated `copies` times."""
    traces = source["device_traces"]
    root = {k: v for k, v in source.items() if k != "device_traces"}
    root["device_traces"] = [[_MARKER.format(device)] for device in range(len(traces))]
    out.write(pickle.PROTO + bytes([4]))  # outside any frame, where readers and sniffers look for it
    writer = _Writer(out)
    # The root without its traces is pickled by the C pickler and copied op by op (frames dropped, memo
    # indices kept: the splice adds its own memo entries only after every index the root uses); each marker
    # list's item becomes that device's repeated trace.
    skeleton = pickle.dumps(root, protocol=4)
    ops = list(pickletools.genops(skeleton))
    replaced: list[str] = []  # after a marker: its MEMOIZE and the APPEND that put it in its list
    for index, (op, arg, position) in enumerate(ops):
        end = ops[index + 1][2] if index + 1 < len(ops) else len(skeleton)
        if op.name in ("PROTO", "FRAME"):
            continue
        if op.name == "SHORT_BINUNICODE" and isinstance(arg, str) and arg.startswith(_MARKER.format("")):
            _splice(writer, traces[int(arg.rsplit("-", 1)[1])], copies)
            replaced = ["MEMOIZE", "APPEND"]
            continue
        if replaced and op.name == replaced[0]:
            replaced.pop(0)
            continue
        if op.name == "MEMOIZE":
            writer.memo_count += 1
        writer.raw(skeleton[position:end])
    writer.commit()


def _splice(writer: _Writer, trace: list[dict[str, Any]], copies: int) -> None:
    """The trace's entries, appended to the marker's list (already on the stack) in batches of 1,000."""
    times = [e["time_us"] for e in trace if type(e.get("time_us")) is int]
    span = max(times) - min(times) + 1 if times else 0
    entries = _TraceWriter(writer)
    for copy in range(copies):
        entries.start_copy()
        for start in range(0, len(trace), 1000):
            batch = trace[start : start + 1000]
            if len(batch) > 1:
                writer.raw(pickle.MARK)
            for index, entry in enumerate(batch, start):
                if copy == 0:
                    entries.first_copy(index, entry)
                else:
                    time_us = entry.get("time_us")
                    entries.later_copy(index, entry, time_us + copy * span if type(time_us) is int else None)
            writer.raw(pickle.APPENDS if len(batch) > 1 else pickle.APPEND)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--copies", type=int, required=True)
    args = parser.parse_args()
    from oomlab.parse.snapshot.safe_pickle import load_plain_pickle

    start = time.perf_counter()
    source = load_plain_pickle(args.source)
    with open(args.out, "wb") as out:
        derive(source, out, args.copies)
    size = args.out.stat().st_size
    print(
        f"{args.out}: {size / 1e9:.2f} GB, {args.copies} copies, {time.perf_counter() - start:.0f} s", file=sys.stderr
    )


if __name__ == "__main__":
    main()
