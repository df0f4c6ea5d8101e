"""Log lines in the envelopes log stores and shippers wrap them in: each application line with its time, and the
host or node, pod, namespace, container and stream it came from.

- JSON lines, one record a line: journald (`journalctl -o json`: `__REALTIME_TIMESTAMP`, `_HOSTNAME`,
  `MESSAGE`), Docker's json-file (`log`, `stream`, `time`), Fluent Bit and Vector (`log` / `message` with a
  `kubernetes` object), Loki's `logcli --output=jsonl` (`labels`, `line`, `timestamp`), a Cloud Logging sink
  export (`textPayload` / `jsonPayload`, `resource.labels`, `labels`).
- JSON documents, pretty or not, one after another: Loki's `query_range` answer (`data.result[].stream` and
  its `values`, nanoseconds), an Elasticsearch / OpenSearch `_search` (or `_msearch`) answer's `hits.hits[]._source`,
  CloudWatch Logs' `filter-log-events` / `get-log-events` (`events[]`, milliseconds), `gcloud logging read
  --format=json` (an array of entries), `journalctl -o json-pretty`, Fluent Bit's JSON output
  (`[epoch, {record}]`).
- Prefixed text: `kubectl logs --timestamps` / `docker logs -t` (an RFC 3339 time and a space), the CRI log
  kubelet writes (`<time> stdout|stderr P|F <line>`), `kubectl logs --prefix` (`[pod/NAME/CONTAINER] `) and
  Fluent Bit's stdout output (`[0] tag: [[epoch, {}], {"key"=>"value", ...}]`).

A console's own liberties are taken as they come: Kibana's `\"\"\"` strings, an elided `...` line, a prompt or
prose before the document. A line that is none of its envelope's records is skipped, with the reason.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ...records import Reject

_EPOCH = datetime(1970, 1, 1)
_RAW_LIMIT = 2000


@dataclass(frozen=True, slots=True)
class Entry:
    """One application line (or message) as its envelope hands it over; `line` is where its text stands in the
    file. `partial`: a CRI `P` line, which the next line of its stream continues."""

    line: int
    ts: datetime | None
    text: str | None
    host: str | None = None
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    stream: str | None = None
    partial: bool = False


# -- where each fact stands in a record, in the order tried (a path is a tuple of keys) ---------------------------

_TEXT = (
    ("MESSAGE",),
    ("log",),
    ("message",),
    ("textPayload",),
    ("line",),
    ("jsonPayload", "message"),
    ("jsonPayload", "msg"),
)
_TIME = (("__REALTIME_TIMESTAMP",), ("timestamp",), ("@timestamp",), ("time",), ("date",), ("receiveTimestamp",))
_HOST = (
    ("_HOSTNAME",),
    ("kubernetes", "host"),
    ("kubernetes", "node_name"),
    ("kubernetes", "pod_node_name"),
    ("kubernetes", "node", "name"),
    ("labels", "compute.googleapis.com/resource_name"),
    ("host", "name"),
    ("host", "hostname"),
    ("hostname",),
    ("host",),
    ("node_name",),
    ("nodename",),
    ("node",),
)
_POD = (
    ("kubernetes", "pod_name"),
    ("kubernetes", "pod", "name"),
    ("resource", "labels", "pod_name"),
    ("labels", "container.googleapis.com/pod_name"),
    ("pod",),
    ("pod_name",),
)
_NAMESPACE = (
    ("kubernetes", "namespace_name"),
    ("kubernetes", "pod_namespace"),
    ("kubernetes", "namespace"),
    ("resource", "labels", "namespace_name"),
    ("labels", "container.googleapis.com/namespace_name"),
    ("namespace",),
    ("namespace_name",),
)
_CONTAINER = (
    ("kubernetes", "container_name"),
    ("kubernetes", "container", "name"),
    ("resource", "labels", "container_name"),
    ("CONTAINER_NAME",),
    ("container",),
    ("container_name",),
)
_STREAM = (("stream",), ("labels", "container.googleapis.com/stream"), ("_stream",))
# Keys that make a JSON object an envelope's record rather than a request log's line or an application's JSON.
_SIGNATURES = (
    {"__REALTIME_TIMESTAMP"},
    {"MESSAGE", "_HOSTNAME"},
    {"log", "stream"},
    {"log", "kubernetes"},
    {"message", "kubernetes"},
    {"textPayload"},
    {"jsonPayload"},
    {"labels", "line"},
    {"message", "@timestamp"},
    {"log", "date"},
)


def _at(record: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(record, dict) or key not in record:
            return None
        record = record[key]
    return record


def _first_text(record: dict[str, Any], paths: tuple[tuple[str, ...], ...]) -> str | None:
    for path in paths:
        value = _at(record, path)
        if isinstance(value, str) and value:
            return value
    return None


def is_record(value: Any) -> bool:
    """Whether a decoded JSON value is one envelope record."""
    return isinstance(value, dict) and any(keys <= value.keys() for keys in _SIGNATURES)


# Where structured loggers put the failure beside the message (ECS' error.*, structlog's exception, zap's
# stacktrace): a traceback ending in an OOM stands there, not in the message, and is read after it.
_DETAILS = (
    ("error",),
    ("error", "message"),
    ("error", "stack_trace"),
    ("exception",),
    ("exc_info",),
    ("stack_trace",),
    ("stacktrace",),
    ("traceback",),
    ("jsonPayload", "error"),
    ("jsonPayload", "stacktrace"),
    ("jsonPayload", "exception"),
)


def entry_of(record: dict[str, Any], line: int, ts: datetime | None = None) -> Entry:
    """The entry a record holds; `ts`, the time its wrapper states (Fluent Bit's epoch), wins over the record's."""
    return Entry(
        line,
        ts or _record_time(record),
        _with_details(_message(record), record),
        _first_text(record, _HOST),
        _first_text(record, _POD),
        _first_text(record, _NAMESPACE),
        _first_text(record, _CONTAINER),
        _stream(record),
    )


def _message(record: dict[str, Any]) -> str | None:
    for path in _TEXT:
        value = _at(record, path)
        if isinstance(value, list) and value and all(isinstance(b, int) for b in value):  # journald's bytes
            return bytes(b & 0xFF for b in value).decode("utf-8", errors="replace")
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and path == ("message",):  # a shipper that parsed the line as JSON
            return json.dumps(value)
    return None


def _with_details(message: str | None, record: dict[str, Any]) -> str | None:
    """The message, and after it, a line each, the failure's text the record keeps beside it."""
    details = [v for path in _DETAILS if isinstance(v := _at(record, path), str) and v and v not in (message or "")]
    if not details:
        return message
    return "\n".join([message or "", *dict.fromkeys(details)])


def _stream(record: dict[str, Any]) -> str | None:
    stream = _first_text(record, _STREAM)
    if stream is None and isinstance(record.get("logName"), str):  # Cloud Logging: projects/p/logs/stdout
        stream = urllib.parse.unquote(record["logName"]).rsplit("/", 1)[-1]  # run.googleapis.com%2Fstderr
    return stream if stream in ("stdout", "stderr") else None


def _record_time(record: dict[str, Any]) -> datetime | None:
    """The record's time under a key stores use, else its one top-level value written as an ISO date and time (a
    store configured with its own time field, e.g. Grafana's Elasticsearch `timeField`)."""
    for path in _TIME:
        moment = parse_moment(_at(record, path))
        if moment is not None:
            return moment
    stamped = [m for v in record.values() if isinstance(v, str) and "T" in v and (m := parse_moment(v)) is not None]
    return stamped[0] if len(stamped) == 1 else None


# Epoch numbers by their size: any time a GPU log can carry (2000-2100) is 9.5e8..4.1e9 seconds, a thousand times
# that in milliseconds, a million in microseconds, a billion in nanoseconds: the ranges do not meet.
_EPOCH_UNITS = ((1e17, 1e-9), (1e14, 1e-6), (1e11, 1e-3), (0.0, 1.0))
_ISO = re.compile(r"^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d+))?\s*(Z|[+-]\d\d:?\d\d)?$")


def parse_moment(value: Any) -> datetime | None:
    """A time as envelopes write it (UTC, naive): an epoch number or numeric string (seconds to nanoseconds, by
    size), or an ISO 8601 string with any number of fraction digits and an optional zone (none: UTC)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str) and re.fullmatch(r"\d{9,19}(?:\.\d+)?", value.strip()):
        digits = value.strip()
        if "." not in digits:  # nanoseconds as a string: exact, not through a float
            number = int(digits)
            scale = next(s for floor, s in _EPOCH_UNITS if number >= floor)
            micros = number * round(scale * 1e9) // 1000 if scale < 1 else number * 1_000_000
            return _EPOCH + timedelta(microseconds=micros) if scale < 1 else _EPOCH + timedelta(seconds=number)
        value = float(digits)
    if isinstance(value, int | float):
        scale = next(s for floor, s in _EPOCH_UNITS if abs(value) >= floor)
        return _EPOCH + timedelta(microseconds=round(value * scale * 1e6))
    if not isinstance(value, str):
        return None
    match = _ISO.match(value.strip())
    if match is None:
        return None
    day, clock, fraction, zone = match.groups()
    moment = datetime.fromisoformat(f"{day}T{clock}").replace(microsecond=int((fraction or "0")[:6].ljust(6, "0")))
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = int(zone[1:3]), int(zone[-2:])
        moment -= sign * timedelta(hours=hours, minutes=minutes)
    return moment


# -- JSON lines ---------------------------------------------------------------------------------------------------


def read_json_lines(lines: Iterable[str]) -> Iterator[Entry | Reject]:
    """Records one a line (Fluent Bit's `[epoch, {record}]` too); a line that is none is a reject."""
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        try:
            value = json.loads(text)
        except ValueError as exc:
            yield Reject(number, f"not an envelope record: {exc}", line[:_RAW_LIMIT])
            continue
        found = list(_records(value))
        if not found:
            yield Reject(number, "not an envelope record: no message, time or source keys", line[:_RAW_LIMIT])
        for record, ts in found:
            yield entry_of(record, number, ts)


def _records(value: Any) -> Iterator[tuple[dict[str, Any], datetime | None]]:
    """The records a decoded JSON value holds, each with the time its wrapper states (or None)."""
    if isinstance(value, list):
        pair = _fluent_pair(value)
        if pair is not None:
            yield pair
            return
        for item in value:
            yield from _records(item)
        return
    if not isinstance(value, dict):
        return
    if "labels" in value and "line" in value and isinstance(value["labels"], dict):  # logcli --output=jsonl
        yield {**value["labels"], **{k: v for k, v in value.items() if k != "labels"}}, None
        return
    if is_record(value):
        yield value, None
        return
    yield from _document_records(value)


def _fluent_pair(value: list[Any]) -> tuple[dict[str, Any], datetime | None] | None:
    """Fluent Bit's `[epoch, {record}]`, or v2's `[[epoch, {metadata}], {record}]`."""
    if len(value) != 2 or not isinstance(value[1], dict):
        return None
    stamp = value[0][0] if isinstance(value[0], list) and value[0] else value[0]
    if isinstance(stamp, bool) or not isinstance(stamp, int | float):
        return None
    return value[1], parse_moment(stamp)


def _document_records(doc: dict[str, Any]) -> Iterator[tuple[dict[str, Any], datetime | None]]:
    """The records of a store's answer: Loki streams, Elasticsearch hits, CloudWatch events."""
    data = doc.get("data")
    if isinstance(data, dict) and data.get("resultType") == "streams":
        for stream in data.get("result") or []:
            labels = stream.get("stream") or {}
            for pair in stream.get("values") or []:
                if isinstance(pair, list) and len(pair) >= 2:
                    yield {**labels, "line": pair[1]}, parse_moment(pair[0])
        return
    for answer in doc.get("responses") or [doc]:  # _msearch: one answer per search
        hits = _at(answer, ("hits", "hits"))
        for hit in hits if isinstance(hits, list) else []:
            source = hit.get("_source") if isinstance(hit, dict) else None
            if isinstance(source, dict):
                yield source, None
    events = doc.get("events")
    if isinstance(events, list):
        for event in events:
            if isinstance(event, dict) and "message" in event:
                yield event, None


# -- JSON documents -----------------------------------------------------------------------------------------------

# Kibana's console writes a string holding quotes or newlines between triple quotes.
_TRIPLE = re.compile(r'"""(.*?)"""', re.S)
# A line standing for what the poster left out (`...`, `…`), inside a document.
_ELIDED = re.compile(r"^[ \t]*(?:\.{3}|…),?[ \t]*$", re.M)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_DOC_START = re.compile(r"^[ \t]*`?[{\[]", re.M)


def read_documents(text: str) -> tuple[list[Entry], list[Reject]]:
    """The records of JSON documents standing one after another in `text` (prose or a prompt before them is
    passed over), each entry at the line its message stands on."""
    cleaned = _tolerated(text)
    decoder = json.JSONDecoder()
    entries: list[Entry] = []
    rejects: list[Reject] = []
    finder = _MessageLines(text)
    start = _DOC_START.search(cleaned)
    while start is not None:
        position = cleaned.index(start.group().strip().lstrip("`")[0], start.start())
        try:
            value, end = decoder.raw_decode(cleaned, position)
        except ValueError as exc:
            value, end = _cut_short(cleaned, position), len(cleaned)
            if value is None:
                rejects.append(Reject(cleaned.count("\n", 0, position) + 1, f"not a JSON document: {exc}", ""))
                newline = cleaned.find("\n", position)
                start = _DOC_START.search(cleaned, newline + 1) if newline >= 0 else None
                continue
        for record, ts in _records(value):
            entry = entry_of(record, 0, ts)
            entries.append(_at_line(entry, finder.line_of(entry.text)))
        start = _DOC_START.search(cleaned, end)
    return entries, rejects


# A document cut short (a paste that stops mid-answer) is read up to its last whole value; the attempt is bounded.
_REPAIR_LIMIT_BYTES = 64 << 20
_REPAIR_TRIES = 64


def _cut_short(text: str, start: int) -> Any:
    """The document starting at `start` read up to its last whole value, its open brackets closed; None when it is
    not a document cut short (or too large to mend)."""
    if len(text) - start > _REPAIR_LIMIT_BYTES:
        return None
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []  # where a value ends, and the brackets open there
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                cuts.append((index + 1, "".join(stack)))
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
        elif char in "}]":
            if not stack:
                return None
            stack.pop()
            if not stack:
                return None  # the document closes: it is not cut short, but wrong
            cuts.append((index + 1, "".join(stack)))
    for end, open_brackets in reversed(cuts[-_REPAIR_TRIES:]):
        closers = "".join("}" if b == "{" else "]" for b in reversed(open_brackets))
        try:
            return json.loads(text[start:end].rstrip().rstrip(",") + closers)
        except ValueError:
            continue
    return None


def _tolerated(text: str) -> str:
    """The text with a console's liberties made JSON, each line kept where it was (triple-quoted strings become
    JSON strings, with their newlines escaped and the lines they spanned kept as blank lines)."""

    def quoted(match: re.Match[str]) -> str:
        inner = match.group(1)
        return json.dumps(inner) + "\n" * inner.count("\n")

    text = _TRIPLE.sub(quoted, text)
    text = _ELIDED.sub("", text)
    return _TRAILING_COMMA.sub(r"\1", text)


def _at_line(entry: Entry, line: int) -> Entry:
    return Entry(line, entry.ts, entry.text, entry.host, entry.pod, entry.namespace, entry.container, entry.stream)


_MESSAGE_KEY = re.compile(r'"(?:MESSAGE|log|message|textPayload|jsonPayload|line)"\s*:')


class _MessageLines:
    """Where each message stands in the original text, found in order: its start, as JSON writes it or as a
    console does, searched from where the previous one was found."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.cursor = 0

    def line_of(self, message: str | None) -> int:
        if message:
            head = message.split("\n", 1)[0][:40]
            for written in (json.dumps(head)[1:-1], json.dumps(head, ensure_ascii=False)[1:-1], head):
                found = self.text.find(written, self.cursor) if written else -1
                if found >= 0:
                    return self._found(found, len(written))
        key = _MESSAGE_KEY.search(self.text, self.cursor)  # bytes, or a payload without a message: its key
        return self._found(key.start(), len(key.group())) if key else self.text.count("\n", 0, self.cursor) + 1

    def _found(self, position: int, length: int) -> int:
        self.cursor = position + length
        return self.text.count("\n", 0, position) + 1


# -- prefixed text ------------------------------------------------------------------------------------------------

# `kubectl logs --timestamps`, `docker logs -t`: RFC 3339 with a fraction and a zone, a space, the line.
_STAMPED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6,9}(?:Z|[+-]\d\d:\d\d))(?: (.*))?$")
# The CRI log kubelet writes under /var/log/pods: time, stream, P(artial) or F(ull), the line.
_CRI = re.compile(r"^(\d{4}-\d\d-\d\dT\S+) (stdout|stderr) ([PF])(?: (.*))?$")
_PREFIX = re.compile(r"^\[pod/([^/\]]+)/([^\]]+)\] ?(.*)$")
# Fluent Bit's stdout output: `[0] tag: [[1747747726.566696094, {}], {"key"=>"value", ...}]`.
_FLUENT_STDOUT = re.compile(r"^\[\d+\] [^:\s]+: \[\[?(\d+(?:\.\d+)?)")
_FLUENT_KEY = re.compile(r'"([\w.\-/]+)"=>')


def read_prefixed(lines: Iterable[str]) -> Iterator[Entry | Reject]:
    """Prefixed lines: each its entry; a line without its envelope's prefix goes with the one before (a line
    the application broke) or, at the start, is a reject."""
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        entry = _prefixed(line, number)
        if entry is None:
            yield Reject(number, "not an envelope line: no time, CRI or pod prefix", line[:_RAW_LIMIT])
        else:
            yield entry


def _prefixed(line: str, number: int) -> Entry | None:
    pod = container = None
    prefix = _PREFIX.match(line)
    if prefix is not None:
        pod, container, line = prefix.groups()
    cri = _CRI.match(line)
    if cri is not None:
        stamp, stream, flag, text = cri.groups()
        return Entry(number, parse_moment(stamp), text or "", None, pod, None, container, stream, flag == "P")
    stamped = _STAMPED.match(line)
    if stamped is not None:
        return Entry(number, parse_moment(stamped.group(1)), stamped.group(2) or "", None, pod, None, container)
    fluent = _FLUENT_STDOUT.match(line)
    if fluent is not None:
        return entry_of(_ruby_hash(line), number, parse_moment(float(fluent.group(1))))
    if prefix is not None:
        return Entry(number, None, line, None, pod, None, container)
    return None


def _ruby_hash(line: str) -> dict[str, Any]:
    """The keys of Fluent Bit's `"key"=>"value"` record, nested ones flattened into `kubernetes` (the first
    value of each key wins; a value runs to the next key, so quotes inside it need no escaping)."""
    keys = list(_FLUENT_KEY.finditer(line))
    flat: dict[str, str] = {}
    for here, after in zip(keys, [*keys[1:], None], strict=True):
        end = after.start() if after is not None else len(line)
        value = line[here.end() : end].rstrip().rstrip("]}").rstrip().rstrip(",").rstrip()
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            flat.setdefault(here.group(1), value[1:-1])
    inner = {k: flat[k] for k in ("host", "pod_name", "namespace_name", "container_name") if k in flat}
    return {**flat, "kubernetes": inner}


# -- which envelope, and its entries ------------------------------------------------------------------------------

JSON_LINES, DOCUMENTS, PREFIXED = "json lines", "JSON documents", "prefixed lines"
# Lines that carry only a time (`kubectl logs --timestamps`): read as they are, a text log's lines are dated by it.
STAMPED = "timestamped lines"
_PROBE_LINES = 20
# Most lines of a prefixed file carry the prefix: a broken line or two among them is still the file's kind.
_PREFIXED_SHARE = 0.8


def envelope_layout(head: str) -> str | None:
    """How the head of a file wraps its lines (JSON_LINES, DOCUMENTS, PREFIXED, STAMPED), or None when it is plain
    text."""
    lines = [line for line in head.splitlines()[:200] if line.strip()][:_PROBE_LINES]
    if not lines:
        return None
    prefixed = [entry for line in lines if (entry := _prefixed(line, 0)) is not None]
    if len(prefixed) >= _PREFIXED_SHARE * len(lines):
        plain = all(e.stream is None and e.pod is None and e.host is None for e in prefixed)
        return STAMPED if plain else PREFIXED
    records = [_json_record_line(line) for line in lines]
    # JSON lines: records, and among them at most the pieces of a record a paste broke over lines
    if any(records) and all(
        r or line.lstrip().startswith("{") or line.rstrip().endswith("}")
        for r, line in zip(records, lines, strict=True)
    ):
        return JSON_LINES
    if _DOC_START.search(head) and _DOCUMENT_KEYS.search(head):
        return DOCUMENTS
    return None


def _json_record_line(line: str) -> bool:
    try:
        value = json.loads(line)
    except ValueError:
        return False
    return next(_records(value), None) is not None


# What a store's JSON document names (pretty-printed, a record's keys stand on lines of their own).
_DOCUMENT_KEYS = re.compile(
    r'"(?:__REALTIME_TIMESTAMP|MESSAGE|textPayload|jsonPayload|_source|logStreamName|ingestionTime|@timestamp)"'
    r'|"resultType"\s*:\s*"streams"|"kubernetes"\s*:\s*\{|"labels"\s*:\s*\{[^}]*\}\s*,\s*"line"\s*:'
)


def read_envelope(text: str, layout: str) -> tuple[list[Entry], list[Reject]]:
    """The entries of a whole text of a layout (envelope_layout), and what could not be read."""
    if layout == DOCUMENTS:
        entries, rejects = read_documents(text)
    else:
        reader = read_prefixed if layout in (PREFIXED, STAMPED) else read_json_lines
        entries, rejects = [], []
        for item in reader(text.splitlines()):
            (rejects if isinstance(item, Reject) else entries).append(item)
    return entries, rejects


def unwrapped(entry: Entry) -> Entry:
    """An entry whose message is itself a record (Promtail shipping Docker's json-file lines to Loki unparsed):
    the inner record's message and stream, the outer envelope's time and place where the inner states none."""
    text = entry.text
    if not text or not text.startswith("{") or not text.rstrip().endswith("}"):
        return entry
    try:
        record = json.loads(text)
    except ValueError:
        return entry
    if not is_record(record):
        return entry
    inner = entry_of(record, entry.line)
    return Entry(
        entry.line,
        entry.ts or inner.ts,
        inner.text,
        entry.host or inner.host,
        entry.pod or inner.pod,
        entry.namespace or inner.namespace,
        entry.container or inner.container,
        entry.stream or inner.stream,
    )
