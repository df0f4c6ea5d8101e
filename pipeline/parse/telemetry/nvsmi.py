"""`nvidia-smi --query-gpu=... --format=csv` and `--query-compute-apps=... --format=csv` samples.

The header names the queried fields and their units (`memory.used [MiB]`); values carry the unit again
unless `nounits` was asked for (`4038 MiB` or `4038`). Fields nvidia-smi cannot read are written as
`[N/A]`, `[Not Supported]` or, for a process that exited between listing and reading, `[No data]`
(seen in the real H200 capture): those become NULL. Fields this module does not map are ignored. A file
queried without `timestamp` gives samples without a time (ingest places them at --at, else leaves ts NULL).

`--format=csv,noheader` leaves the field names out. Which value is which can then only be told where the
values say it themselves: a GPU UUID, a bus id, nvidia-smi's timestamp, a compute-apps row's one integer
(the pid), one `MiB` amount (its memory) and one name. Memory, utilisation or temperature columns of
`--query-gpu` cannot be told apart (`2004, 2004, 0, 44`): such a file is refused, asking for the header.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path
from zoneinfo import ZoneInfo

from ...errors import InputError
from ...records import Reject
from ...units import UNIT_BYTES, parse_timestamp, to_utc_naive
from ..compression import open_binary
from .memory import impossible_memory
from .values import BUS_ID, GPU_SAMPLES, GPU_UUID, PROCESS_SAMPLES, RAW_LIMIT, TelemetryRow

NVSMI_GPU, NVSMI_APPS = "nvsmi_gpu", "nvsmi_apps"


@dataclass(frozen=True, slots=True)
class Column:
    """How one queried field becomes a table column: `kind` is ts | int | text | bytes | float."""

    column: str
    kind: str


# The --query-gpu fields oomlab keeps (`nvidia-smi --help-query-gpu` names), as data.
GPU_FIELDS: dict[str, Column] = {
    "timestamp": Column("ts", "ts"),
    "index": Column("gpu_index", "int"),
    "name": Column("gpu_name", "text"),
    "gpu_name": Column("gpu_name", "text"),
    "uuid": Column("gpu_uuid", "text"),
    "gpu_uuid": Column("gpu_uuid", "text"),
    "pci.bus_id": Column("gpu_bus_id", "text"),
    "gpu_bus_id": Column("gpu_bus_id", "text"),
    "memory.used": Column("memory_used_bytes", "bytes"),
    "memory.total": Column("memory_total_bytes", "bytes"),
    "memory.free": Column("memory_free_bytes", "bytes"),
    "memory.reserved": Column("memory_reserved_bytes", "bytes"),
    "utilization.gpu": Column("utilization_gpu", "float"),
    "utilization.memory": Column("utilization_memory", "float"),
    "temperature.gpu": Column("temperature", "float"),
    "power.draw": Column("power_w", "float"),
    "power.draw.instant": Column("power_w", "float"),
    "power.draw.average": Column("power_w", "float"),
    "hostname": Column("hostname", "text"),
}
# The --query-compute-apps fields oomlab keeps (`nvidia-smi --help-query-compute-apps`).
APPS_FIELDS: dict[str, Column] = {
    "timestamp": Column("ts", "ts"),
    "pid": Column("pid", "int"),
    "process_name": Column("process_name", "text"),
    "name": Column("process_name", "text"),
    "used_gpu_memory": Column("used_bytes", "bytes"),
    "used_memory": Column("used_bytes", "bytes"),
    "gpu_uuid": Column("gpu_uuid", "text"),
    "gpu_bus_id": Column("gpu_bus_id", "text"),
}
# Every field `--query-compute-apps` knows (`nvidia-smi --help-query-compute-apps`), and those only it has.
_APPS_QUERY = frozenset({*APPS_FIELDS, "gpu_name", "gpu_serial"})
_APPS_ONLY = frozenset({"pid", "process_name", "used_gpu_memory", "used_memory"})

# What nvidia-smi writes for a value it does not have: N/A, or a message in brackets.
_MISSING = frozenset({"", "n/a"})
_MESSAGES = frozenset(
    {
        "[n/a]",
        "[not supported]",
        "[no data]",
        "[not found]",
        "[unknown error]",
        "[insufficient permissions]",
        "[gpu is lost]",
        "[gpu requires reset]",
        "[requested functionality has been deprecated]",
    }
)
_HEADER = re.compile(r"^\s*([\w.]+)\s*(?:\[([^\]]*)\])?\s*$")
_NUMBER_UNIT = re.compile(r"^([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%]*)$")
_SMI_TIME = re.compile(r"^(\d{4})/(\d{2})/(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6})\d*)?$")
_MIB_AMOUNT = re.compile(r"^\d+(?:\.\d+)?\s*MiB$")
_HEAD_LINES = 20


@dataclass(frozen=True, slots=True)
class Field:
    """One header field: its nvidia-smi name, the unit in brackets, and where it goes (None: ignored)."""

    name: str
    unit: str
    target: Column | None


def header_fields(header: str) -> list[Field]:
    """The fields of a header line; unknown names are kept with no target."""
    fields = []
    for raw in header.split(","):
        match = _HEADER.match(raw)
        name, unit = (match[1].lower(), (match[2] or "").strip()) if match else (raw.strip().lower(), "")
        fields.append(Field(name, unit, None))
    return fields


def nvsmi_kind(header: str) -> str | None:
    """NVSMI_GPU or NVSMI_APPS for the header line of an nvidia-smi query CSV, else None: a compute-apps
    query names only its own fields, one of them a field --query-gpu does not have (a request log with a
    `pid` column is not one); a --query-gpu one names a dotted field (`memory.used`, `utilization.gpu`, ...)."""
    names = {f.name for f in header_fields(header)}
    if len(names) < 2:
        return None
    if names <= _APPS_QUERY and names & _APPS_ONLY:
        return NVSMI_APPS
    if any("." in name and name in GPU_FIELDS for name in names):
        return NVSMI_GPU
    return None


def headerless_kind(text: str) -> str | None:
    """NVSMI_APPS or NVSMI_GPU for the start of a `--format=csv,noheader` file, else None: every one of its
    first lines has the same number of values, at most half of them names, and one says nvidia-smi
    (a bracketed message such as `[Not Supported]`, a `MiB` amount, its timestamp or a GPU UUID)."""
    lines = [line for line in text.splitlines()[:_HEAD_LINES] if line.strip()]
    rows = [_split(line) for line in lines]
    if not rows or len(rows[0]) < 2 or any(len(row) != len(rows[0]) for row in rows):
        return None
    if not all(_looks_like_values(row) for row in rows):
        return None
    inferred = _infer_apps(rows)
    return NVSMI_APPS if inferred is not None else NVSMI_GPU


def _split(line: str) -> list[str]:
    return [value.strip() for value in next(csv.reader([line], skipinitialspace=True), [])]


def _looks_like_values(values: list[str]) -> bool:
    names = [v for v in values if _value_kind(v) == "text"]
    said = any(
        v.lower() in _MESSAGES or _MIB_AMOUNT.match(v) or _SMI_TIME.match(v) or GPU_UUID.match(v) for v in values
    )
    return bool(said) and len(names) * 2 <= len(values)


def _value_kind(value: str) -> str:
    """What one headerless value can be told to be: ts, uuid, bus, int, mib, missing, number or text."""
    if value.lower() in _MISSING or value.lower() in _MESSAGES:
        return "missing"
    if _SMI_TIME.match(value):
        return "ts"
    if GPU_UUID.match(value):
        return "uuid"
    if BUS_ID.match(value):
        return "bus"
    if value.isdigit():
        return "int"
    if _MIB_AMOUNT.match(value):
        return "mib"
    return "number" if _NUMBER_UNIT.match(value) else "text"


# A compute-apps row's value kinds, each the field it must be when it occurs once.
_APPS_BY_KIND = {
    "ts": "timestamp",
    "uuid": "gpu_uuid",
    "bus": "gpu_bus_id",
    "int": "pid",
    "mib": "used_memory",
    "text": "process_name",
}


def _infer_apps(rows: list[list[str]]) -> list[str] | None:
    """The compute-apps field names of headerless rows, or None when the values do not tell them: the first
    row with every value present must give each field a kind no other value has."""
    complete = next((row for row in rows if all(_value_kind(v) != "missing" for v in row)), None)
    if complete is None:
        return None
    kinds = [_value_kind(v) for v in complete]
    if len(set(kinds)) != len(kinds) or not all(k in _APPS_BY_KIND for k in kinds):
        return None
    names = [_APPS_BY_KIND[k] for k in kinds]
    return names if {"pid", "process_name"} & set(names) else None


def read_nvsmi(
    path: str | Path, kind: str, tz: str | None = None, columns: tuple[str, ...] = ()
) -> Iterator[dict[str, object] | Reject]:
    """Every data row of an nvidia-smi query CSV as a dict of table columns, or a Reject naming its line.
    `columns`: the field names of a file written with `noheader`, as they were queried (--columns)."""
    with open_binary(path) as handle:
        text = io.TextIOWrapper(handle, encoding="utf-8", errors="replace", newline="")
        first = text.readline()
        lines: Iterator[str] = text
        header, start = first, 2
        if nvsmi_kind(first) is None:  # `noheader`: the names are given, or told from the values
            head = [first, *itertools.islice(text, _HEAD_LINES - 1)]
            header, start = ", ".join(columns or _headerless_names(path, head)), 1
            lines = itertools.chain(head, text)
        yield from read_nvsmi_lines(lines, header, kind, tz, start)


def read_nvsmi_lines(
    lines: Iterable[str], header: str, kind: str, tz: str | None = None, start: int = 1
) -> Iterator[dict[str, object] | Reject]:
    """The data rows of `lines` under `header` (the CSV's own first line, or the fields a command line queried),
    numbered from `start`: a file's, or a block's inside other text."""
    mapping = APPS_FIELDS if kind == NVSMI_APPS else GPU_FIELDS
    fields = [Field(f.name, f.unit, mapping.get(f.name)) for f in header_fields(header)]
    timed = any(f.target and f.target.kind == "ts" for f in fields)
    reader = _RowReader(fields, ZoneInfo(tz) if tz else None, tz, kind, timed)
    for number, line in enumerate(lines, start=start):
        if line.strip():
            yield reader.row(number, line.rstrip("\r\n"))


def telemetry_rows(items: Iterable[dict[str, object] | Reject], kind: str) -> tuple[list[TelemetryRow], list[Reject]]:
    """A query CSV's rows as rows of its table (gpu_process_samples for compute-apps), and its rejects."""
    table = PROCESS_SAMPLES if kind == NVSMI_APPS else GPU_SAMPLES
    rows: list[TelemetryRow] = []
    rejects: list[Reject] = []
    for item in items:
        if isinstance(item, Reject):
            rejects.append(item)
        else:
            rows.append(TelemetryRow(table, item))
    return rows, rejects


def _headerless_names(path: str | Path, head: list[str]) -> list[str]:
    """The field names of a `noheader` file told from its first lines; InputError when they cannot be."""
    names = _infer_apps([_split(line) for line in head if line.strip()])
    if names is None:
        raise InputError(
            str(path),
            "nvidia-smi CSV without a header: which value is which field cannot be told from the values "
            f"({head[0].strip()[:80]!r})",
            hint="pass the queried field names with --columns (e.g. `--columns memory.total,memory.used`), or "
            "query it without `noheader`",
        )
    return names


@dataclass
class _RowReader:
    """Turns one data line into the row of its table."""

    fields: list[Field]
    zone: ZoneInfo | None
    tz: str | None
    kind: str
    timed: bool  # the query has a timestamp field: a row without one is rejected

    def row(self, number: int, line: str) -> dict[str, object] | Reject:
        """The row's columns, or a Reject whose reason names the field that failed."""
        parsed = next(csv.reader([line], skipinitialspace=True), [])
        values = self._fit(parsed)
        if values is None:
            return Reject(number, f"expected {len(self.fields)} fields, found {len(parsed)}", line[:RAW_LIMIT])
        out: dict[str, object] = {"line": number}
        for field, value in zip(self.fields, values, strict=True):
            if not value.strip() and field.unit:  # a measured field is a number or `[N/A]`, never nothing
                reason = f"{field.name}: empty: the line was cut (a file copied or written in part)"
                return Reject(number, reason, line[:RAW_LIMIT])
            if field.target is None or out.get(field.target.column) is not None:
                continue  # an ignored field, or a second name for a column already filled
            try:
                out[field.target.column] = self._convert(field, value.strip())
            except ValueError as exc:
                return Reject(number, f"{field.name}: {exc}", line[:RAW_LIMIT])
        if self.timed and out.get("ts") is None:
            return Reject(number, "timestamp: missing", line[:RAW_LIMIT])
        impossible = impossible_memory(out, self.names)
        if impossible is not None:  # read, but no card shows it: drawn, it would be a level above 100 %
            return Reject(number, impossible, line[:RAW_LIMIT])
        return out

    @cached_property
    def names(self) -> dict[str, str]:
        """Each column's field name in the header (the first field that fills it), for reasons."""
        return {f.target.column: f.name for f in reversed(self.fields) if f.target is not None}

    def _fit(self, values: list[str]) -> list[str] | None:
        """The values lined up with the fields; a process name holding commas is joined back together."""
        extra = len(values) - len(self.fields)
        if extra == 0:
            return values
        names = [f.name for f in self.fields]
        where = next((names.index(n) for n in ("process_name", "name") if n in names), None)
        if extra < 0 or self.kind != NVSMI_APPS or where is None:
            return None
        return [*values[:where], ",".join(values[where : where + extra + 1]), *values[where + extra + 1 :]]

    def _convert(self, field: Field, value: str) -> object:
        """One value as its column's type; None for what nvidia-smi could not read."""
        if value.lower() in _MISSING or (value.startswith("[") and value.endswith("]")):
            return None
        kind = field.target.kind if field.target else "text"
        if kind == "ts":
            return self._timestamp(value)
        if kind == "text":
            return value
        if kind == "int":
            if not value.isdigit():
                raise ValueError(f"{value!r} is not an integer")
            return int(value)
        number, unit = _number_unit(value)
        if kind == "bytes":
            return _to_bytes(number, unit or field.unit or "MiB")
        return number

    def _timestamp(self, value: str) -> datetime:
        """`2026/11/30 01:49:09.001` (nvidia-smi's own format, read fast) or any format parse_timestamp reads."""
        match = _SMI_TIME.match(value)
        if match is None:
            moment = parse_timestamp(value, self.tz)
            if moment is None:
                raise ValueError("missing")
            return moment
        micros = int((match[7] or "0").ljust(6, "0"))
        moment = datetime(
            int(match[1]), int(match[2]), int(match[3]), int(match[4]), int(match[5]), int(match[6]), micros
        )
        return to_utc_naive(moment, self.zone)


def _number_unit(value: str) -> tuple[float, str]:
    """`4038 MiB` -> (4038.0, 'MiB'); `81.39 W` -> (81.39, 'W'); `43 %` -> (43.0, '%')."""
    match = _NUMBER_UNIT.match(value)
    if match is None:
        raise ValueError(f"{value!r} is not a number")
    return float(match[1]), match[2]


def _to_bytes(number: float, unit: str) -> int:
    """A memory amount in bytes (nvidia-smi's MiB are binary; a bare number is MiB, as `nounits` writes it)."""
    multiplier = UNIT_BYTES.get(unit.lower())
    if multiplier is None:
        raise ValueError(f"unknown memory unit {unit!r}")
    return round(number * multiplier)
