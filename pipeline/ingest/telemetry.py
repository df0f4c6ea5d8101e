"""GPU telemetry: nvidia-smi (query CSVs, its table, -q, dmon), dcgmi dmon, rocm-smi and Prometheus scrapes
(DCGM, serving engines) into their tables, and serving engines' start-up memory reports from text logs into
`engine_memory`."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import duckdb

if TYPE_CHECKING:
    import pyarrow as pa

    from ..parse.telemetry.blocks import Found
    from ..parse.telemetry.startup import StartupMemory, StartupScanner
    from .job import LoadJob

from ..config import IngestOptions
from ..errors import InputError
from ..load import tables as load
from ..parse import formats
from ..parse.compression import READ_ERRORS, open_binary
from ..parse.telemetry.memory import impossible_memory
from ..parse.telemetry.naming import file_instance
from ..parse.telemetry.nvsmi import NVSMI_APPS, NVSMI_GPU, read_nvsmi, telemetry_rows
from ..parse.telemetry.prom import read_samples
from ..parse.telemetry.scrape import ENGINE_SAMPLES, Scrape
from ..parse.telemetry.values import GPU_COLUMNS, GPU_SAMPLES, PROCESS_COLUMNS, PROCESS_SAMPLES, TelemetryRow
from ..parse.text.logline import LineClock
from ..records import Reject
from .plausible import implausible_time

# Arrow types of every telemetry column (the tables' DuckDB types, in sql/tables/).
_TYPES: dict[str, str] = {
    "source_id": "int32",
    "line": "int64",
    "ts": "timestamp",
    "instance": "string",
    "gpu_index": "int32",
    "gpu_name": "string",
    "gpu_uuid": "string",
    "gpu_bus_id": "string",
    "origin": "string",
    "pid": "int64",
    "process_name": "string",
    "framework": "string",
    "model_name": "string",
    "metric": "string",
    "value": "float64",
    "labels": "string",
    "variant": "string",
    "pool": "string",
    "message": "string",
    "gpu_memory_utilization": "float64",
    "kv_cache_tokens": "int64",
    "utilization_gpu": "float64",
    "utilization_memory": "float64",
    "temperature": "float64",
    "power_w": "float64",
    "mig_instance_id": "int32",
    "mig_profile": "string",
    "hostname": "string",
    "pod": "string",
    "namespace": "string",
    "container": "string",
}
# The columns each telemetry table is loaded with (a row's missing keys are NULL).
_TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    GPU_SAMPLES: ("source_id", *GPU_COLUMNS, "instance", "origin"),
    PROCESS_SAMPLES: ("source_id", *PROCESS_COLUMNS, "instance", "origin"),
    ENGINE_SAMPLES: ("source_id", "line", "ts", "instance", "framework", "model_name", "metric", "value", "labels"),
}
# The largest whole numbers an INTEGER and a BIGINT column hold.
_INT32_MAX, _INT64_MAX = 2**31 - 1, 2**63 - 1
# A UUID masked by whoever shared the file (`GPU-00000000-0000-...`): it names no GPU to find a host by.
_MASKED_UUID = re.compile(r"^(?:GPU|MIG)-[0-]+$")


def load_job(job: LoadJob) -> tuple[int, int]:
    """A telemetry file's loader (parse/formats.py)."""
    return ingest_telemetry(job.con, job.path, job.kind, job.source_id, job.options)


def ingest_telemetry(
    con: duckdb.DuckDBPyConnection, path: Path, kind: str, source_id: int, options: IngestOptions
) -> tuple[int, int]:
    """Load one telemetry file of a detected kind (formats.TELEMETRY) into its tables; returns (rows, rejects)."""
    try:
        rows, rejects, origin = _read(path, kind, options)
    except (*READ_ERRORS, ZoneInfoNotFoundError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(
            str(path), f"cannot read: {reason}", hint="check that the file is complete and not corrupted"
        ) from exc
    inserted, outsized = insert_telemetry(con, path, rows, origin, source_id, options)
    return inserted, load.insert_rejects(con, source_id, rejects + outsized)


def insert_telemetry(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    rows: list[TelemetryRow],
    origin: str,
    source_id: int,
    options: IngestOptions,
    instance: str | None = None,
) -> tuple[int, list[Reject]]:
    """Insert a file's rows (or a block's inside a text log, whose instance the log's is) into their tables;
    returns how many went in and the rejects of those that cannot."""
    rows, outsized = _within_columns(rows)
    fallback = instance or _fallback_instance(con, path, rows)
    placed = _Placement(source_id, origin, options, fallback).place(rows)
    return sum(insert_rows(con, table, placed[table], columns) for table, columns in _TABLE_COLUMNS.items()), outsized


def insert_blocks(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    found: list[Found],
    source_id: int,
    options: IngestOptions,
    instance: str,
) -> tuple[int, list[Reject]]:
    """The telemetry blocks found inside a text log (pasted reports, shell sessions): their rows, as a telemetry
    file's, on the log's instance where they name no host; returns rows inserted and rejects to keep."""
    inserted, rejects = 0, []
    for block in found:
        rows, wrong = _split(block.rows)
        count, outsized = insert_telemetry(con, path, rows, block.origin, source_id, options, instance)
        inserted += count
        rejects += block.rejects + wrong + outsized
    return inserted, rejects


def _read(path: Path, kind: str, options: IngestOptions) -> tuple[list[TelemetryRow], list[Reject], str]:
    """The file's rows, its rejects, and the origin its GPU rows get (its format's, parse/formats.py)."""
    fmt = formats.BY_NAME[kind]
    origin = fmt.origin or kind
    if kind in (NVSMI_GPU, NVSMI_APPS):
        return *_read_query_csv(path, kind, options), origin
    with open_binary(path) as handle:
        lines = (raw.decode("utf-8", errors="replace") for raw in handle)
        if kind == formats.PROMETHEUS:
            scrape = Scrape(at=options.at, instance=options.instance).read(read_samples(lines))
            return scrape.rows(), scrape.rejects, origin
        assert fmt.read is not None, f"{kind} has no reader"
        zone = ZoneInfo(options.tz) if options.tz else None
        return *_split(list(fmt.read(lines, zone))), origin


def _read_query_csv(path: Path, kind: str, options: IngestOptions) -> tuple[list[TelemetryRow], list[Reject]]:
    """An nvidia-smi query CSV's rows (it checks its rows' memory, under the CSV's names) and rejects; a
    header-less one whose values cannot name their fields is one reject that says so."""
    try:
        return telemetry_rows(read_nvsmi(path, kind, options.tz, options.columns), kind)
    except InputError as exc:
        return [], [Reject(1, exc.reason if exc.hint is None else f"{exc.reason} ({exc.hint})", "")]


def _split(items: list[TelemetryRow | Reject]) -> tuple[list[TelemetryRow], list[Reject]]:
    """A report's rows, less those whose memory no card can show (a reject each, naming the columns), and its
    rejects."""
    rows: list[TelemetryRow] = []
    rejects = [i for i in items if isinstance(i, Reject)]
    for item in items:
        if isinstance(item, TelemetryRow):
            reason = impossible_memory(item.row, {})
            if reason is None:
                rows.append(item)
            else:
                rejects.append(Reject(item.row.get("line"), reason, json.dumps(item.row, default=str)))  # type: ignore[arg-type]
    return rows, rejects


def _within_columns(rows: list[TelemetryRow]) -> tuple[list[TelemetryRow], list[Reject]]:
    """The rows whose whole numbers fit their columns (INTEGER indexes, BIGINT the rest) and whose time is one a
    GPU log can carry, and a reject for each other: a mangled line's `GPU 99999999999` is no device index, and
    would fail the whole file's insert."""
    kept: list[TelemetryRow] = []
    rejects: list[Reject] = []
    for item in rows:
        big = next((column for column, value in item.row.items() if _outsized(column, value)), None)
        reason = implausible_time(item.row.get("ts")) if big is None else f"{big} {item.row[big]} is out of range"  # type: ignore[arg-type]
        if reason is None:
            kept.append(item)
        else:
            rejects.append(Reject(item.row.get("line"), reason, json.dumps(item.row, default=str)))  # type: ignore[arg-type]
    return kept, rejects


def _outsized(column: str, value: object) -> bool:
    limit = _INT32_MAX if _TYPES.get(column) == "int32" else _INT64_MAX
    return isinstance(value, int) and abs(value) > limit


def _fallback_instance(con: duckdb.DuckDBPyConnection, path: Path, rows: list[TelemetryRow]) -> str:
    """The instance of rows that name no host: the one already holding one of the file's GPUs (by UUID: the
    compute-apps file of a host whose --query-gpu file was ingested, or the other way round), else the one the
    file's name gives (its folder, for a file named after the tool; naming.file_instance)."""
    uuids = sorted({u for r in rows if isinstance(u := r.row.get("gpu_uuid"), str) and not _MASKED_UUID.match(u)})
    if uuids:
        known = con.execute(
            "SELECT instance FROM ("
            "SELECT instance FROM gpu_samples WHERE list_contains($uuids, gpu_uuid) "
            "UNION ALL SELECT instance FROM gpu_process_samples WHERE list_contains($uuids, gpu_uuid)"
            ") WHERE instance IS NOT NULL GROUP BY instance ORDER BY count(*) DESC, instance LIMIT 1",
            {"uuids": uuids},
        ).fetchall()
        if known:
            return known[0][0]
    return file_instance(path)


@dataclass(frozen=True)
class _Placement:
    """Where and when a file's rows go: --instance, else the host the row names, else the file's instance;
    the row's own time, else --at, else none (NULL: never the file's modification time)."""

    source_id: int
    origin: str
    options: IngestOptions
    fallback: str

    def place(self, rows: list[TelemetryRow]) -> dict[str, list[dict[str, object]]]:
        placed: dict[str, list[dict[str, object]]] = {table: [] for table in _TABLE_COLUMNS}
        for item in rows:
            row = dict(item.row)
            row["source_id"] = self.source_id
            row["ts"] = row["ts"] if row.get("ts") is not None else self.options.at
            row["instance"] = self.options.instance or row.get("instance") or row.get("hostname") or self.fallback
            if item.table != ENGINE_SAMPLES:
                row["origin"] = self.origin
            placed[item.table].append(row)
        return placed


def startup_scanner(options: IngestOptions, year: int | None = None) -> StartupScanner:
    """A reader of serving engines' start-up memory reports for the windows of a text log's OOM scan; `year`
    for its lines that state none."""
    # imported here: it brings textscan (polars, numpy), which nvidia-smi and Prometheus files never need
    from ..parse.telemetry.startup import StartupScanner

    try:
        return StartupScanner(LineClock(options.tz, year))
    except (ZoneInfoNotFoundError, ValueError):
        return StartupScanner(LineClock(None, year))  # the OOM scan reports the unknown zone as the file's error


def insert_engine_memory(
    con: duckdb.DuckDBPyConnection, reports: list[StartupMemory], source_id: int, instance: str
) -> int:
    """Append the engine start-up memory reports of one text log to engine_memory; returns how many."""
    import pyarrow as pa

    from ..parse.telemetry.startup import STARTUP_COLUMNS

    if not reports:
        return 0
    labels = {"source_id": source_id, "instance": instance}
    rows = [{**asdict(r), **labels, "variant": r.variant or None} for r in reports]
    # `device` is text (`CUDA0`), a column _TYPES does not know (unknown ones are int64): added to the table here
    typed = tuple(c for c in (*labels, *STARTUP_COLUMNS) if c != "device")
    table = _arrow(rows, typed).append_column("device", pa.array([r.device for r in reports], pa.string()))
    con.register("new_engine_memory", table)
    try:
        con.execute("INSERT INTO engine_memory BY NAME SELECT * FROM new_engine_memory")
    finally:
        con.unregister("new_engine_memory")
    return len(rows)


def insert_rows(
    con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, object]], columns: tuple[str, ...]
) -> int:
    """Append rows (dicts; missing keys are NULL) to one of the telemetry tables; returns how many."""
    if not rows:
        return 0
    con.register("new_telemetry", _arrow(rows, tuple(dict.fromkeys(columns))))
    try:
        # The table name is one of this module's constants, never input.
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM new_telemetry")
    finally:
        con.unregister("new_telemetry")
    return len(rows)


def _arrow(rows: list[dict[str, object]], columns: tuple[str, ...]) -> pa.Table:
    """Rows as an Arrow table; byte amounts and counts are int64, the rest as _TYPES says."""
    import pyarrow as pa  # here, not at the top: only telemetry files pay for it

    def arrow_type(column: str) -> pa.DataType:
        name = _TYPES.get(column, "int64")
        return pa.timestamp("us") if name == "timestamp" else pa.type_for_alias(name)

    schema = pa.schema([(c, arrow_type(c)) for c in columns])
    return pa.table({c: [r.get(c) for r in rows] for c in columns}, schema=schema)
