"""One record of a log store's or shipper's envelope as an Entry: where its message, time, host or node, pod,
namespace, container and stream stand (parse/text/envelope.py reads the envelopes, this module their records), and
the records a decoded JSON value holds (a record; Fluent Bit's `[epoch, {record}]`; a Loki answer's streams, an
Elasticsearch answer's hits, CloudWatch's events)."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...units import epoch_to_datetime, parse_timestamp


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


# A time written as a number: 9 to 19 digits are epoch seconds to nanoseconds of any time a GPU log can carry
# (2000-2100: 9.5e8 s to 4.1e18 ns); a shorter number is something else (a count, a level).
_EPOCH_TEXT = re.compile(r"\d{9,19}(?:\.\d+)?")


def _epoch_number(text: str) -> int | float:
    """An epoch written as text, exactly: seconds with a fraction (Fluent Bit's `1692118483.267342676`) as whole
    microseconds, cut (a float would round the ninth digit into the sixth)."""
    whole, _, fraction = text.partition(".")
    if not fraction:
        return int(whole)
    if len(whole) <= 10:  # seconds: the fraction's first six digits are the microseconds
        return int(whole) * 1_000_000 + int(fraction[:6].ljust(6, "0"))
    return float(text)


def parse_moment(value: Any) -> datetime | None:
    """A time as envelopes write it (UTC, naive): an epoch number or numeric string (seconds to nanoseconds, by
    size: units.epoch_to_datetime), or an ISO 8601 string (none of a zone: UTC); None when it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str) and _EPOCH_TEXT.fullmatch(value.strip()):
        value = _epoch_number(value.strip())
    if isinstance(value, int | float):
        return epoch_to_datetime(value)
    if not isinstance(value, str) or not re.match(r"\s*\d{4}-\d\d-\d\d", value):
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


def records_in(value: Any) -> Iterator[tuple[dict[str, Any], datetime | None]]:
    """The records a decoded JSON value holds, each with the time its wrapper states (or None)."""
    if isinstance(value, list):
        pair = _fluent_pair(value)
        if pair is not None:
            yield pair
            return
        for item in value:
            yield from records_in(item)
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
