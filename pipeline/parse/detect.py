"""Tell what a file holds from its content, not its name."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ..errors import EmptyInputError, InputError
from ..fields import FIELDS, Field, looks_like_request_log
from .calendar import is_calendar
from .compression import open_binary, read_head
from .snapshot.sniff import sniff_snapshot
from .telemetry.nvsmi import NVSMI_APPS, NVSMI_GPU, headerless_kind, nvsmi_kind
from .telemetry.prom import looks_like_prometheus
from .telemetry.reports import REPORT_ORIGINS, report_kind

# Kinds a source can have; `sources.kind` stores these names.
JSONL, JSON_ARRAY, CSV, PARQUET, SNAPSHOT, TEXT = "jsonl", "json", "csv", "parquet", "snapshot", "text"
CALENDAR = "calendar"
# torch.cuda.memory_stats() as JSON (memory_summary() tables are read from text logs).
MEMORY_STATS = "memory_stats"
# Telemetry: nvidia-smi query CSVs (--query-gpu, --query-compute-apps), Prometheus text (DCGM, serving
# engines) and the reports GPU tools print (nvidia-smi's table, -q and dmon, dcgmi dmon, rocm-smi).
PROMETHEUS = "prometheus"
TELEMETRY = frozenset({NVSMI_GPU, NVSMI_APPS, PROMETHEUS, *REPORT_ORIGINS})
# Kinds whose fast reader's row numbers are checked against the file's line count.
LINE_ORIENTED = frozenset({JSONL, CSV})


def detect_kind(path: str | Path, fields: tuple[Field, ...] = FIELDS) -> str:
    """The kind of input at `path`; raises InputError for empty, binary or unreadable files."""
    head = _head(path)
    if not head.strip():
        raise EmptyInputError(str(path), "empty file, nothing to ingest")
    if head.startswith(b"PAR1"):
        return PARQUET
    if sniff_snapshot(head):
        return SNAPSHOT
    # utf-8-sig: a byte-order mark (Windows editors and exporters write one) is no part of the first line
    text = head.decode("utf-8-sig", errors="replace")
    kind = _structured_kind(text, fields)
    if kind is None and _is_binary(head):  # a stray control byte inside a log is not binary content
        raise InputError(str(path), "binary content that is neither a snapshot pickle nor Parquet")
    return kind or TEXT


HEAD_BYTES = 64 << 10  # what the kind is told from: the first lines of any log, however wide its rows


def _head(path: str | Path) -> bytes:
    """The file's first HEAD_BYTES; when its first line is longer than that (a request log whose first record
    holds a whole prompt, say), that line's start, a line end, and the HEAD_BYTES after the line: the head then
    reads as a cut first line followed by whole ones, and the kind is told from those."""
    try:
        head = read_head(path, HEAD_BYTES)
        if len(head) == HEAD_BYTES and b"\n" not in head:
            return head + b"\n" + _after_first_line(path)
        return head
    except (OSError, EOFError, ValueError) as exc:  # corrupt gzip/xz/zstd streams raise these
        raise InputError(str(path), f"cannot read: {exc}") from exc


def _after_first_line(path: str | Path) -> bytes:
    """Up to HEAD_BYTES after the file's first line end (none without one), read through in 1 MiB pieces: a line
    of any length costs one pass over it, never its size in memory."""
    with open_binary(path) as stream:
        while piece := stream.read(1 << 20):
            end = piece.find(b"\n")
            if end >= 0:
                rest = piece[end + 1 :]
                return rest[:HEAD_BYTES] if len(rest) >= HEAD_BYTES else rest + stream.read(HEAD_BYTES - len(rest))
    return b""


def _is_binary(head: bytes) -> bool:
    """A NUL byte or more than 10% control bytes (besides tab, CR, LF, ESC) at the start means binary."""
    sample = head[:8192]
    control = sum(1 for b in sample if b < 32 and b not in (9, 10, 13, 27))
    return b"\x00" in sample[:512] or control > len(sample) * 0.1


def _structured_kind(text: str, fields: tuple[Field, ...]) -> str | None:
    """JSONL, JSON array, CSV or a JSON snapshot; None for anything else (treated as a text log)."""
    stripped = text.lstrip()
    if looks_like_prometheus(stripped):
        return PROMETHEUS
    report = report_kind(text)
    if report is not None:
        return report
    if stripped.startswith("{") and '"allocated_bytes.all.current"' in stripped:
        return MEMORY_STATS
    if _may_be_json_lines(stripped):
        kind = _json_lines_kind(stripped, fields)
        if kind is not None or stripped.startswith("{"):
            return kind
    if stripped.startswith("["):
        return _json_array_kind(stripped, fields)
    return _csv_kind(text, fields)


# How many lines of the head tell JSON Lines apart: an export's comment line or a first line cut short (a log
# copied from its middle) is one line among them, not the file's kind.
_PROBE_LINES = 20


def _may_be_json_lines(text: str) -> bool:
    """Whether one of the first lines opens a JSON object (the first may be a comment or cut short)."""
    return any(line.lstrip().startswith("{") for line in text.split("\n", 3)[:3])


def _opens_with_other_lines(text: str) -> bool:
    """Whether the text opens with a comment line (`# exported ...`, `// ...`) before its first line of data."""
    return text.startswith(("#", "//"))


def _json_lines_kind(text: str, fields: tuple[Field, ...]) -> str | None:
    """JSONL when most of the head's lines (comments aside) are JSON objects and the first of them has a request
    log's fields; a comment or a cut first line is rejected line by line when the file is loaded."""
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1] or lines  # the head may end inside a line
    data = [line for line in lines[:_PROBE_LINES] if line.strip() and not _opens_with_other_lines(line.lstrip())]
    objects = [obj for obj in map(_json_object, data) if obj is not None]
    if not objects:
        return None
    first_is_data = _json_object(data[0]) is not None
    if not first_is_data and 2 * len(objects) < len(data):  # a cut first line: most of the others must be JSON
        return None
    return JSONL if looks_like_request_log(list(objects[0]), fields) else None


def _json_object(line: str) -> dict | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _json_array_kind(text: str, fields: tuple[Field, ...]) -> str | None:
    decoder = json.JSONDecoder()
    body = text[1:].lstrip()
    try:
        first, _ = decoder.raw_decode(body)
    except ValueError:
        return None
    if isinstance(first, dict) and is_calendar(list(first)):
        return CALENDAR
    if isinstance(first, dict) and looks_like_request_log(list(first), fields):
        return JSON_ARRAY
    return None


def csv_delimiter(header: str) -> str | None:
    """The delimiter of a CSV header line, or None when it is not one."""
    try:
        return csv.Sniffer().sniff(header, delimiters=",\t;|").delimiter
    except csv.Error:
        return None


def _csv_kind(text: str, fields: tuple[Field, ...]) -> str | None:
    header = text.split("\n", 1)[0]
    telemetry = nvsmi_kind(header) or headerless_kind(text)
    if telemetry is not None:
        return telemetry
    delimiter = csv_delimiter(header)
    if delimiter is None:
        return None
    try:
        columns = next(csv.reader(io.StringIO(header), delimiter=delimiter))
    except (csv.Error, StopIteration):  # a NUL byte, an open quote: not a CSV header
        return None
    if is_calendar(columns):
        return CALENDAR
    return CSV if looks_like_request_log(columns, fields) else None
