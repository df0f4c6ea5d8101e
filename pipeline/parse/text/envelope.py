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
from collections.abc import Iterable, Iterator
from typing import Any

from ...records import Reject
from .envelope_documents import DOC_START, read_documents
from .envelope_record import Entry, entry_of, is_record, parse_moment, records_in

_RAW_LIMIT = 2000


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
        found = list(records_in(value))
        if not found:
            yield Reject(number, "not an envelope record: no message, time or source keys", line[:_RAW_LIMIT])
        for record, ts in found:
            yield entry_of(record, number, ts)


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
        return entry_of(_ruby_hash(line), number, parse_moment(fluent.group(1)))
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
    if DOC_START.search(head) and _DOCUMENT_KEYS.search(head):
        return DOCUMENTS
    return None


def _json_record_line(line: str) -> bool:
    try:
        value = json.loads(line)
    except ValueError:
        return False
    return next(records_in(value), None) is not None


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
