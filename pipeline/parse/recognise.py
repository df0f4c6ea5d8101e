"""How a whole file of each structured format is recognised from its head: request logs (JSON Lines, a JSON
array, CSV), calendars of scheduled jobs, memory_stats() dicts. The registry (`formats.py`) names these; the
telemetry formats' recognisers are in their own modules (parse/telemetry/)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

from ..fields import Field, looks_like_request_log
from .calendar import is_calendar
from .telemetry.nvsmi import headerless_kind, nvsmi_kind


@dataclass(frozen=True)
class Head:
    """The first bytes of a file (`detect.HEAD_BYTES`), decoded, and the field mapping request logs are read
    with."""

    raw: bytes
    text: str
    fields: tuple[Field, ...]

    @property
    def stripped(self) -> str:
        return self.text.lstrip()


# How many lines of the head tell JSON Lines apart: an export's comment line or a first line cut short (a log
# copied from its middle) is one line among them, not the file's kind.
_PROBE_LINES = 20


def memory_stats(head: Head) -> bool:
    """torch.cuda.memory_stats() as JSON."""
    return head.stripped.startswith("{") and '"allocated_bytes.all.current"' in head.stripped


def json_lines(head: Head) -> bool:
    """JSON Lines whose first object has a request log's fields."""
    return _may_be_json_lines(head.stripped) and _json_lines_request_log(head.stripped, head.fields)


def json_array(head: Head) -> bool:
    """A JSON document of request objects whose first has a request log's fields: an array of them, an object of
    them keyed by id (pandas' `orient="index"`, a profiler's `json.dump(records)`), or an object whose one key
    holds the array (`{"requests": [...]}`)."""
    first = _first_array_object(head) or _first_keyed_object(head)
    return first is not None and looks_like_request_log(list(first), head.fields)


def calendar(head: Head) -> bool:
    """A calendar of scheduled jobs: a JSON array of them, or a CSV whose header names a job's columns."""
    first = _first_array_object(head)
    if first is not None:
        return is_calendar(list(first))
    columns = _csv_columns(head)
    return columns is not None and is_calendar(columns)


def request_csv(head: Head) -> bool:
    """A CSV whose header has a request log's fields."""
    columns = _csv_columns(head)
    return columns is not None and looks_like_request_log(columns, head.fields)


def nvsmi_csv(kind: str):
    """An nvidia-smi query CSV of `kind` (NVSMI_GPU or NVSMI_APPS): its header says so, or, without one, its
    values do."""

    def recognise(head: Head) -> bool:
        if _json_shaped(head):
            return False
        header = head.text.split("\n", 1)[0]
        return (nvsmi_kind(header) or headerless_kind(head.text)) == kind

    return recognise


def _json_shaped(head: Head) -> bool:
    """A head that opens JSON (an object, or an array): a JSON file that is no request log or calendar is a text
    log, never a CSV of anything."""
    return head.stripped.startswith(("{", "["))


def _may_be_json_lines(text: str) -> bool:
    """Whether one of the first lines opens a JSON object (the first may be a comment or cut short)."""
    return any(line.lstrip().startswith("{") for line in text.split("\n", 3)[:3])


def _opens_with_other_lines(text: str) -> bool:
    """Whether the text opens with a comment line (`# exported ...`, `// ...`) before its first line of data."""
    return text.startswith(("#", "//"))


def _json_lines_request_log(text: str, fields: tuple[Field, ...]) -> bool:
    """Most of the head's lines (comments aside) are JSON objects and the first of them has a request log's
    fields; a comment or a cut first line is rejected line by line when the file is loaded."""
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1] or lines  # the head may end inside a line
    data = [line for line in lines[:_PROBE_LINES] if line.strip() and not _opens_with_other_lines(line.lstrip())]
    objects = [obj for obj in map(_json_object, data) if obj is not None]
    if not objects:
        return False
    first_is_data = _json_object(data[0]) is not None
    if not first_is_data and 2 * len(objects) < len(data):  # a cut first line: most of the others must be JSON
        return False
    return looks_like_request_log(list(objects[0]), fields)


def _json_object(line: str) -> dict | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _first_keyed_object(head: Head) -> dict | None:
    """The first request object of a JSON object that holds them: the first of an array one of its keys holds
    (metadata may stand before it), or its first value when its first two values are objects (records keyed by id;
    one nested object alone is a JSON Lines record's field). The head may cut the document anywhere."""
    if not head.stripped.startswith("{"):
        return None
    decoder, text = json.JSONDecoder(), head.stripped
    objects: list[dict] = []
    at = 1
    try:
        while len(objects) < 2:
            key, at = decoder.raw_decode(text, _skip(text, at))
            at = _skip(text, at)
            if not isinstance(key, str) or text[at : at + 1] != ":":
                return None
            at = _skip(text, at + 1)
            if text[at : at + 1] == "[":  # `"requests": [{...}, ...`, cut by the head further on
                first, _ = decoder.raw_decode(text, _skip(text, at + 1))
                return first if isinstance(first, dict) and not objects else None
            value, at = decoder.raw_decode(text, at)
            if isinstance(value, dict):
                objects.append(value)
            elif objects:  # an object, then a scalar: a record's fields, not records
                return None
            at = _skip(text, at)
            if text[at : at + 1] != ",":
                break
            at += 1
    except ValueError:  # cut by the head: judged from the values read
        pass
    return objects[0] if len(objects) == 2 else None


def _skip(text: str, at: int) -> int:
    """The index of the first non-blank character from `at`."""
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _first_array_object(head: Head) -> dict | None:
    """The first object of a JSON array file (not one that opens JSON Lines)."""
    if not head.stripped.startswith("["):
        return None
    try:
        first, _ = json.JSONDecoder().raw_decode(head.stripped[1:].lstrip())
    except ValueError:
        return None
    return first if isinstance(first, dict) else None


def csv_delimiter(header: str) -> str | None:
    """The delimiter of a CSV header line, or None when it is not one."""
    try:
        return csv.Sniffer().sniff(header, delimiters=",\t;|").delimiter
    except csv.Error:
        return None


def _csv_columns(head: Head) -> list[str] | None:
    """The column names of a CSV head's first line; None when it is no CSV header (or the head opens JSON)."""
    if _json_shaped(head):
        return None
    header = head.text.split("\n", 1)[0]
    delimiter = csv_delimiter(header)
    if delimiter is None:
        return None
    try:
        return next(csv.reader(io.StringIO(header), delimiter=delimiter))
    except (csv.Error, StopIteration):  # a NUL byte, an open quote: not a CSV header
        return None
