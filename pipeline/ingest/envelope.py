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
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from ..assets import scratch_dir
from ..config import IngestOptions
from ..errors import InputError
from ..load import tables as load
from ..parse.compression import open_binary
from ..parse.text.envelope import MAX_DOCUMENT_BYTES, Entry, read_envelope, unwrapped
from ..parse.text.host_label import host_named_in


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
    entries, rejects = read_envelope(_text(path), layout)
    streams = streams_of([_placed_by_path(entry, path) for entry in entries])
    fallback = options.instance or host_named_in(path) or options.instance_for(path)
    devices: dict[str, list[tuple[datetime | None, str, int]]] = defaultdict(list)
    for key, lines in streams.items():
        device = devices[options.instance or key.host or key.pod or fallback]
        if device:  # a blank line between streams: no traceback runs from one into the next
            device.append((None, "", device[-1][2]))
        device += lines
    rows = wrong = 0
    moved: list[tuple[int, int, int]] = []
    for number, (device, lines) in enumerate(devices.items(), start=1):
        staged = -number  # rows go in under a staging id, then move to the file's source with its line numbers
        scratch = scratch_dir() / f"envelope-{source_id}-{number}.log"
        scratch.write_text("".join(f"{_stamp(ts)}{text}\n" for ts, text, _ in lines), encoding="utf-8")
        try:
            got, bad = read_log(con, scratch, staged, replace(options, instance=device))
        finally:
            scratch.unlink(missing_ok=True)
        moved += [(staged, index, line) for index, (_, _, line) in enumerate(lines, start=1)]
        rows, wrong = rows + got, wrong + bad
    _move_rows(con, source_id, moved)
    if notes is not None:
        notes.append(_describe(layout, len(entries), streams))
    return rows, wrong + load.insert_rejects(con, source_id, rejects)


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


def _text(path: Path) -> str:
    with open_binary(path) as handle:
        data = handle.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise InputError(str(path), f"a log in envelopes over {MAX_DOCUMENT_BYTES >> 30} GiB is not read whole")
    return data.decode("utf-8", errors="replace")


def streams_of(entries: list[Entry]) -> dict[StreamKey, list[tuple[datetime | None, str, int]]]:
    """Each stream's lines (time, text, file line) in the order they were written; a CRI partial line is joined
    to the rest of its line, and a message of several lines is several lines at its entry's time."""
    grouped: dict[StreamKey, list[Entry]] = defaultdict(list)
    for entry in map(unwrapped, entries):  # a record inside a record (Docker's lines shipped to Loki as they are)
        grouped[StreamKey(entry.host, entry.pod, entry.namespace, entry.container, entry.stream)].append(entry)
    streams = {}
    for key, found in grouped.items():
        # entries without a time keep their place after the dated ones; sorted() is stable
        ordered = sorted(found, key=lambda e: (e.ts is None, e.ts or datetime.min))
        streams[key] = list(_lines(ordered))
    return streams


def _lines(entries: list[Entry]) -> list[tuple[datetime | None, str, int]]:
    lines: list[tuple[datetime | None, str, int]] = []
    pending: Entry | None = None
    pieces: list[str] = []
    for entry in entries:
        pieces.append(entry.text or "")
        pending = pending or entry
        if entry.partial:
            continue
        for text in "".join(pieces).rstrip("\n").split("\n"):
            lines.append((pending.ts, text.rstrip("\r"), pending.line))
        pending, pieces = None, []
    if pending is not None:  # the stream ends in a partial line: it is still a line
        lines.append((pending.ts, "".join(pieces), pending.line))
    return lines


def _stamp(moment: datetime | None) -> str:
    """The envelope's time written before the line, in UTC (`Z`), as `kubectl logs --timestamps` writes it."""
    return "" if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ ")


def _move_rows(con: duckdb.DuckDBPyConnection, source_id: int, moved: list[tuple[int, int, int]]) -> None:
    """The staged rows under the file's source id, each at its file line: (staging id, scratch line, file line)."""
    if not moved:
        return
    staged, scratch, line = zip(*moved, strict=True)
    con.register("envelope_lines", pa.table({"staged": staged, "scratch": scratch, "line": line}))
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


def _describe(layout: str, count: int, streams: dict[StreamKey, list]) -> str:
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
