"""Text logs in a log store's or shipper's envelope (parse/text/envelope.py): the lines are taken out of their
envelopes, put back together stream by stream, and read as the text log each stream is.

A stream is one source's lines: the same host or node, pod, namespace, container and stdout/stderr. Its lines are
ordered by their envelope's time (a store answers newest first, a query over several pods interleaves them), a
CRI line marked partial is joined to the next, and every line is read with its envelope's time in front of it, so
that a traceback split over envelopes is one traceback again, dated when it was written. Rows keep the file's
line numbers. The device is --instance, else the stream's host or node, else its pod (a pod that names no node
stands for its own device, and `sources` says so), else what the file names (as a plain text log).
"""

from __future__ import annotations

import re
from array import array
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TextIO

import duckdb
import pyarrow as pa

from ..assets import scratch_dir
from ..config import IngestOptions
from ..errors import InputError
from ..load import tables as load
from ..parse import bounded
from ..parse.compression import open_binary
from ..parse.text.envelope import (
    DOCUMENTS,
    PREFIXED,
    STAMPED,
    Entry,
    read_envelope,
    read_json_lines,
    read_prefixed,
    unwrapped,
)
from ..parse.text.host_label import host_named_in
from ..records import Reject


@dataclass(frozen=True)
class StreamKey:
    host: str | None
    pod: str | None
    namespace: str | None
    container: str | None
    stream: str | None


ReadLog = Callable[[duckdb.DuckDBPyConnection, Path, int, IngestOptions], tuple[int, int]]


def ingest_envelope(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    layout: str,
    source_id: int,
    options: IngestOptions,
    notes: list[str] | None,
    read_log: ReadLog,
) -> tuple[int, int]:
    """Load a text log in envelopes: the streams of each device read as one text log (`read_log`, ingest/text.py's
    reader, which inserts its rows), one stream after another; returns (rows, rejects)."""
    fallback = options.instance or host_named_in(path) or options.instance_for(path)
    devices = _Devices(source_id, lambda key: options.instance or key.host or key.pod or fallback)
    text = _whole(path)
    try:
        if text is not None:
            entries, rejects = read_envelope(text, layout)
            del text
            count = len(entries)
            for key, lines in streams_of([_placed_by_path(entry, path) for entry in entries]).items():
                devices.write(key, lines)
        elif layout == DOCUMENTS:
            raise InputError(str(path), f"a JSON document over {bounded.bound_text()} is not read whole")
        else:
            count, rejects = _stream_in_file_order(path, layout, devices)
            if notes is not None:
                notes.append(f"over {bounded.bound_text()}: lines read in the file's order, not sorted by time")
        rows, wrong = devices.read(con, options, read_log)
    finally:
        devices.close()
    if notes is not None:
        notes.append(_describe(layout, count, devices.keys))
    return rows, wrong + load.insert_rejects(con, source_id, rejects)


def _stream_in_file_order(path: Path, layout: str, devices: _Devices) -> tuple[int, list[Reject]]:
    """A log too large to hold: its entries as they come, each stream's partial lines joined (the shippers that
    write such logs write them in time order)."""
    reader = read_prefixed if layout in (PREFIXED, STAMPED) else read_json_lines
    joiners: dict[StreamKey, _Joiner] = {}
    rejects: list[Reject] = []
    count = 0
    with open_binary(path) as handle:
        for item in reader(raw.decode("utf-8", errors="replace") for raw in handle):
            if isinstance(item, Reject):
                rejects.append(item)
                continue
            count += 1
            entry = unwrapped(_placed_by_path(item, path))
            key = _key(entry)
            devices.write(key, joiners.setdefault(key, _Joiner()).feed(entry))
    for key, joiner in joiners.items():
        devices.write(key, joiner.rest())
    return count, rejects


@dataclass
class _Devices:
    """The scratch text log of each device, written stream by stream: every line with its envelope's time before
    it, and the file line it came from. A device's rows go in under a staging id (its negative number) and move to
    the file's source at the end, at the file's line numbers."""

    source_id: int
    device_of: Callable[[StreamKey], str]
    paths: dict[str, Path] = field(default_factory=dict)
    origins: dict[str, array] = field(default_factory=dict)  # per device: the file line of each scratch line
    last: dict[str, StreamKey] = field(default_factory=dict)
    keys: set[StreamKey] = field(default_factory=set)
    _open: OrderedDict[str, TextIO] = field(default_factory=OrderedDict)

    def write(self, key: StreamKey, lines: list[tuple[datetime | None, str, int]]) -> None:
        if not lines:
            return
        self.keys.add(key)
        device = self.device_of(key)
        out = self._handle(device)
        origins = self.origins[device]
        if self.last.get(device, key) != key:  # a blank line between streams: no traceback runs into the next
            out.write("\n")
            origins.append(origins[-1])
        self.last[device] = key
        out.write("".join(f"{_stamp(ts)}{text}\n" for ts, text, _ in lines))
        origins.extend(line for _, _, line in lines)

    def _handle(self, device: str) -> TextIO:
        """The device's scratch file, open for appending; at most _OPEN_FILES stay open (a file naming thousands
        of hosts must not run out of file handles)."""
        if device in self._open:
            self._open.move_to_end(device)
            return self._open[device]
        if device not in self.paths:
            self.paths[device] = scratch_dir() / f"envelope-{self.source_id}-{len(self.paths) + 1}.log"
            self.origins[device] = array("q")
        if len(self._open) >= _OPEN_FILES:
            self._open.popitem(last=False)[1].close()
        handle = self.paths[device].open("a", encoding="utf-8")
        self._open[device] = handle
        return handle

    def read(self, con: duckdb.DuckDBPyConnection, options: IngestOptions, read_log: ReadLog) -> tuple[int, int]:
        """Each device's scratch log read as a text log on that device; then the rows moved to the file's source."""
        for handle in self._open.values():
            handle.close()
        self._open.clear()
        rows = wrong = 0
        for number, (device, scratch) in enumerate(self.paths.items(), start=1):
            got, bad = read_log(con, scratch, -number, replace(options, instance=device))
            rows, wrong = rows + got, wrong + bad
        staged = [(-number, self.origins[device]) for number, device in enumerate(self.paths, start=1)]
        _move_rows(con, self.source_id, staged)
        return rows, wrong

    def close(self) -> None:
        for handle in self._open.values():
            handle.close()
        for scratch in self.paths.values():
            scratch.unlink(missing_ok=True)


# Scratch files held open at once while a log's streams are written out.
_OPEN_FILES = 64


# kubelet's folder of a container's CRI logs: /var/log/pods/<namespace>_<pod>_<pod uid>/<container>/<restart>.log;
# and its links /var/log/containers/<pod>_<namespace>_<container>-<container id>.log.
_POD_FOLDER = re.compile(r"/pods/(?P<namespace>[^_/]+)_(?P<pod>[^_/]+)_[^_/]+/(?P<container>[^/]+)/\d+\.log")
_CONTAINER_LINK = re.compile(r"/containers/(?P<pod>[^_/]+)_(?P<namespace>[^_/]+)_(?P<container>.+)-[0-9a-f]{64}\.log")


def _placed_by_path(entry: Entry, path: Path) -> Entry:
    """An entry that names no pod, in a file kubelet named for its pod: the pod, namespace and container the
    path gives (a pod's log names no node: --instance says which node the folder was taken from)."""
    if entry.pod is not None:
        return entry
    match = _POD_FOLDER.search(path.as_posix()) or _CONTAINER_LINK.search(path.as_posix())
    if match is None:
        return entry
    return replace(
        entry, pod=match["pod"], namespace=match["namespace"], container=entry.container or match["container"]
    )


def _whole(path: Path) -> str | None:
    """The log's text, or None when it is larger than a document read whole may be (parse/bounded.py): to sort
    its streams by time, or decode a JSON document, the whole log is held in memory."""
    with open_binary(path) as handle:
        data = bounded.read_bounded(handle)
    return None if data is None else data.decode("utf-8", errors="replace")


def streams_of(entries: list[Entry]) -> dict[StreamKey, list[tuple[datetime | None, str, int]]]:
    """Each stream's lines (time, text, file line) in the order they were written; a CRI partial line is joined
    to the rest of its line, and a message of several lines is several lines at its entry's time."""
    grouped: dict[StreamKey, list[Entry]] = defaultdict(list)
    for entry in map(unwrapped, entries):  # a record inside a record (Docker's lines shipped to Loki as they are)
        grouped[_key(entry)].append(entry)
    streams = {}
    for key, found in grouped.items():
        # entries without a time keep their place after the dated ones; sorted() is stable
        joiner = _Joiner()
        lines = [
            line for e in sorted(found, key=lambda e: (e.ts is None, e.ts or datetime.min)) for line in joiner.feed(e)
        ]
        streams[key] = lines + joiner.rest()
    return streams


def _key(entry: Entry) -> StreamKey:
    return StreamKey(entry.host, entry.pod, entry.namespace, entry.container, entry.stream)


@dataclass
class _Joiner:
    """One stream's entries as lines: a CRI partial entry waits for the rest of its line, a message of several
    lines is several lines at its entry's time and line."""

    first: Entry | None = None
    pieces: list[str] = field(default_factory=list)

    def feed(self, entry: Entry) -> list[tuple[datetime | None, str, int]]:
        self.pieces.append(entry.text or "")
        self.first = self.first or entry
        if entry.partial:
            return []
        first, text = self.first, "".join(self.pieces)
        self.first, self.pieces = None, []
        return [(first.ts, part.rstrip("\r"), first.line) for part in text.rstrip("\n").split("\n")]

    def rest(self) -> list[tuple[datetime | None, str, int]]:
        """A stream that ends in a partial line: it is still a line."""
        if self.first is None:
            return []
        first, text = self.first, "".join(self.pieces)
        self.first, self.pieces = None, []
        return [(first.ts, text, first.line)]


def _stamp(moment: datetime | None) -> str:
    """The envelope's time written before the line, in UTC (`Z`), as `kubectl logs --timestamps` writes it."""
    return "" if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ ")


def _move_rows(con: duckdb.DuckDBPyConnection, source_id: int, staged: list[tuple[int, array]]) -> None:
    """The staged rows under the file's source id, each at its file line: per staging id, the file line of each of
    its scratch log's lines."""
    if not staged:
        return
    ids = pa.concat_arrays([pa.array([sid] * len(origins), pa.int32()) for sid, origins in staged])
    scratch = pa.concat_arrays([pa.array(range(1, len(origins) + 1), pa.int64()) for _, origins in staged])
    lines = pa.concat_arrays([pa.array(origins, pa.int64()) for _, origins in staged])
    con.register("envelope_lines", pa.table({"staged": ids, "scratch": scratch, "line": lines}))
    try:
        for table in load.tables_with_source_id(con):
            columns = {r[0] for r in con.execute(f'SELECT column_name FROM (DESCRIBE "{table}")').fetchall()}
            if "line" in columns:  # the table names are the database's own, never input
                con.execute(
                    f'UPDATE "{table}" SET line = m.line FROM envelope_lines AS m '
                    f'WHERE "{table}".source_id = m.staged AND "{table}".line = m.scratch'
                )
            con.execute(f'UPDATE "{table}" SET source_id = $id WHERE source_id < 0', {"id": source_id})
    finally:
        con.unregister("envelope_lines")


def _describe(layout: str, count: int, streams: set[StreamKey]) -> str:
    """The note `sources` keeps: what was unwrapped, and which pods stand for their own device."""
    note = f"log in envelopes ({layout}): {count} entries in {len(streams)} streams"
    lone = sorted({k.pod for k in streams if k.pod and not k.host})
    if lone:
        shown = ", ".join(lone[:3]) + (f" and {len(lone) - 3} more" if len(lone) > 3 else "")
        said = (
            "1 pod names no node and stands for its"
            if len(lone) == 1
            else f"{len(lone)} pods name no node and stand for their"
        )
        note += f"; {said} own device: {shown}"
    return note
