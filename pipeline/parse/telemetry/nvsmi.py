"""`nvidia-smi --query-gpu=... --format=csv` and `--query-compute-apps=... --format=csv` samples.

The header names the queried fields and their units (`memory.used [MiB]`); values carry the unit again
unless `nounits` was asked for (`4038 MiB` or `4038`). Fields nvidia-smi cannot read are written as
`[N/A]`, `[Not Supported]` or, for a process that exited between listing and reading, `[No data]`
(seen in the real H200 capture): those become NULL. Fields this module does not map are ignored.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
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

NVSMI_GPU, NVSMI_APPS = "nvsmi_gpu", "nvsmi_apps"
RAW_LIMIT = 2000


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
GPU_COLUMNS: tuple[str, ...] = (
    "line",
    "ts",
    "gpu_index",
    "gpu_name",
    "gpu_uuid",
    "gpu_bus_id",
    "memory_used_bytes",
    "memory_total_bytes",
    "memory_free_bytes",
    "memory_reserved_bytes",
    "utilization_gpu",
    "utilization_memory",
    "temperature",
    "power_w",
)
APPS_COLUMNS: tuple[str, ...] = ("line", "ts", "pid", "process_name", "used_bytes", "gpu_uuid", "gpu_bus_id")

# What nvidia-smi writes for a value it does not have.
_MISSING = frozenset(
    {
        "",
        "n/a",
        "[n/a]",
        "[not supported]",
        "[no data]",
        "[unknown error]",
        "[insufficient permissions]",
        "[gpu is lost]",
        "[gpu requires reset]",
    }
)
_HEADER = re.compile(r"^\s*([\w.]+)\s*(?:\[([^\]]*)\])?\s*$")
_NUMBER_UNIT = re.compile(r"^([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%]*)$")
_SMI_TIME = re.compile(r"^(\d{4})/(\d{2})/(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6})\d*)?$")


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
    """NVSMI_GPU or NVSMI_APPS for the header line of an nvidia-smi query CSV, else None."""
    names = {f.name for f in header_fields(header)}
    if "pid" in names and names & {"used_gpu_memory", "used_memory"}:
        return NVSMI_APPS
    if names & {"memory.used", "memory.total", "memory.free"}:
        return NVSMI_GPU
    return None


def read_nvsmi(path: str | Path, kind: str, tz: str | None = None) -> Iterator[dict[str, object] | Reject]:
    """Every data row of an nvidia-smi query CSV as a dict of table columns, or a Reject naming its line."""
    mapping = APPS_FIELDS if kind == NVSMI_APPS else GPU_FIELDS
    with open_binary(path) as handle:
        text = io.TextIOWrapper(handle, encoding="utf-8", errors="replace", newline="")
        header = text.readline()
        fields = [Field(f.name, f.unit, mapping.get(f.name)) for f in header_fields(header)]
        if not any(f.target and f.target.kind == "ts" for f in fields):
            raise InputError(
                str(path),
                "nvidia-smi CSV without a timestamp field",
                hint="query it with --query-gpu=timestamp,... so samples can be placed in time",
            )
        reader = _RowReader(fields, ZoneInfo(tz) if tz else None, tz, kind)
        for number, line in enumerate(text, start=2):
            if line.strip():
                yield reader.row(number, line.rstrip("\r\n"))


@dataclass
class _RowReader:
    """Turns one data line into the row of its table."""

    fields: list[Field]
    zone: ZoneInfo | None
    tz: str | None
    kind: str

    def row(self, number: int, line: str) -> dict[str, object] | Reject:
        """The row's columns, or a Reject whose reason names the field that failed."""
        parsed = next(csv.reader([line], skipinitialspace=True), [])
        values = self._fit(parsed)
        if values is None:
            return Reject(number, f"expected {len(self.fields)} fields, found {len(parsed)}", line[:RAW_LIMIT])
        out: dict[str, object] = {"line": number}
        for field, value in zip(self.fields, values, strict=True):
            if field.target is None or out.get(field.target.column) is not None:
                continue  # an ignored field, or a second name for a column already filled
            try:
                out[field.target.column] = self._convert(field, value.strip())
            except ValueError as exc:
                return Reject(number, f"{field.name}: {exc}", line[:RAW_LIMIT])
        if out.get("ts") is None:
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
        if value.lower() in _MISSING:
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
