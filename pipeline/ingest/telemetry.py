"""GPU telemetry: nvidia-smi query CSVs and Prometheus scrapes (DCGM, vLLM) into their tables, and vLLM's
start-up memory report from text logs into `engine_memory`."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfoNotFoundError

import duckdb

if TYPE_CHECKING:
    import pyarrow as pa

    from ..parse.telemetry.vllm import StartupMemory, StartupScanner

from ..config import IngestOptions, instance_from_filename
from ..errors import InputError
from ..load import tables as load
from ..parse.compression import READ_ERRORS, open_binary
from ..parse.telemetry.memory import impossible_memory
from ..parse.telemetry.nvsmi import APPS_COLUMNS, GPU_COLUMNS, NVSMI_APPS, NVSMI_GPU, read_nvsmi
from ..parse.telemetry.prom import DCGM_FIELDS, DCGM_PREFIX, VLLM_PREFIX, Sample, dcgm_value, read_samples
from ..parse.text.logline import LineClock
from ..records import Reject

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
}
_DCGM_KEY_LABELS = ("gpu", "UUID", "GPU_I_ID")


def ingest_telemetry(
    con: duckdb.DuckDBPyConnection, path: Path, kind: str, source_id: int, options: IngestOptions
) -> tuple[int, int]:
    """Load one telemetry file of a detected kind (`nvsmi_gpu`, `nvsmi_apps`, `prometheus`)."""
    try:
        if kind in (NVSMI_GPU, NVSMI_APPS):
            return ingest_nvsmi(con, path, kind, source_id, options)
        return ingest_prometheus(con, path, source_id, options)
    except (*READ_ERRORS, ZoneInfoNotFoundError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(
            str(path), f"cannot read: {reason}", hint="check that the file is complete and not corrupted"
        ) from exc


def ingest_nvsmi(
    con: duckdb.DuckDBPyConnection, path: Path, kind: str, source_id: int, options: IngestOptions
) -> tuple[int, int]:
    """Load one nvidia-smi query CSV into gpu_samples or gpu_process_samples; returns (rows, rejects)."""
    rows, rejects = [], []
    for item in read_nvsmi(path, kind, options.tz):
        if isinstance(item, Reject):
            rejects.append(item)
        else:
            rows.append(item)
    labels = {"source_id": source_id, "instance": options.instance_for(path), "origin": "nvidia-smi"}
    if kind == NVSMI_APPS:
        inserted = insert_rows(con, "gpu_process_samples", [{**r, **labels} for r in rows], (*APPS_COLUMNS, *labels))
    else:
        inserted = insert_rows(con, "gpu_samples", [{**r, **labels} for r in rows], (*GPU_COLUMNS, *labels))
    return inserted, load.insert_rejects(con, source_id, rejects)


def ingest_prometheus(
    con: duckdb.DuckDBPyConnection, path: Path, source_id: int, options: IngestOptions
) -> tuple[int, int]:
    """Load one Prometheus text file: DCGM fields into gpu_samples, `vllm:` metrics into engine_samples."""
    scrape = _Scrape(path, source_id, options)
    with open_binary(path) as handle:
        lines = (raw.decode("utf-8", errors="replace") for raw in handle)
        for item in read_samples(lines):
            scrape.take(item)
    gpu = insert_rows(con, "gpu_samples", scrape.possible_gpu_rows(), scrape.GPU_ROW)
    engine = insert_rows(con, "engine_samples", scrape.engine, scrape.ENGINE_ROW)
    return gpu + engine, load.insert_rejects(con, source_id, scrape.rejects)


class _Scrape:
    """Samples of one file, sorted into their tables; DCGM fields of one GPU and moment make one row."""

    GPU_ROW = (
        "source_id",
        "line",
        "ts",
        "instance",
        "gpu_index",
        "gpu_name",
        "gpu_uuid",
        "gpu_bus_id",
        *dict.fromkeys(f.column for f in DCGM_FIELDS.values()),
        "origin",
    )
    ENGINE_ROW = ("source_id", "line", "ts", "instance", "framework", "model_name", "metric", "value", "labels")

    def __init__(self, path: Path, source_id: int, options: IngestOptions) -> None:
        self.source_id = source_id
        self.options = options
        self.fallback_instance = instance_from_filename(path)
        # A sample without a timestamp is one of a single scrape saved to the file: it takes the file's time.
        self.file_time = datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)
        self.gpus: dict[tuple, dict[str, object]] = {}
        self.engine: list[dict[str, object]] = []
        self.rejects: list[Reject] = []
        self._untimed: set[tuple] = set()

    def take(self, item: Sample | Reject) -> None:
        """File one sample (or reject) where it belongs; other metric families are not loaded."""
        if isinstance(item, Reject):
            self.rejects.append(item)
        elif item.name.startswith(DCGM_PREFIX) and item.name in DCGM_FIELDS:
            self._dcgm(item)
        elif item.name.startswith(VLLM_PREFIX) and not item.name.endswith("_bucket"):
            self._vllm(item)

    def possible_gpu_rows(self) -> list[dict[str, object]]:
        """The GPU rows, less those whose memory no card can show (each a reject at the line of its first
        field): DCGM's fields of one GPU and moment are only complete once the whole file is read."""
        names = {field.column: name for name, field in DCGM_FIELDS.items()}
        kept = []
        for row in self.gpus.values():
            reason = impossible_memory(row, names)
            if reason is None:
                kept.append(row)
            else:
                self.rejects.append(Reject(row["line"], reason, json.dumps(row, default=str)))  # type: ignore[arg-type]
        return kept

    def _ts(self, sample: Sample) -> datetime | None:
        """The sample's time; None (and a reject) for a series repeated without timestamps."""
        if sample.ts is not None:
            return sample.ts
        series = (sample.name, tuple(sorted(sample.labels.items())))
        if series in self._untimed:
            self.rejects.append(
                Reject(
                    sample.line,
                    f"{sample.name}: series repeated without a timestamp "
                    "(several scrapes in one file need sample timestamps)",
                    sample.raw,
                )
            )
            return None
        self._untimed.add(series)
        return self.file_time

    def _instance(self, labels: dict[str, str]) -> str:
        """--instance, else the exporter's Hostname label, else the file name."""
        return self.options.instance or labels.get("Hostname") or self.fallback_instance

    def _dcgm(self, sample: Sample) -> None:
        """A DCGM field: one column of its GPU's row at that moment."""
        gpu = sample.labels.get("gpu", "")
        if not gpu.isdigit():
            self.rejects.append(Reject(sample.line, f"{sample.name}: no gpu index label", sample.raw))
            return
        try:
            value = dcgm_value(sample, DCGM_FIELDS[sample.name])
        except ValueError as exc:
            self.rejects.append(Reject(sample.line, str(exc), sample.raw))
            return
        ts = self._ts(sample)
        if ts is None:
            return
        instance = self._instance(sample.labels)
        key = (ts, instance, *(sample.labels.get(k) for k in _DCGM_KEY_LABELS))
        row = self.gpus.setdefault(
            key,
            {
                "source_id": self.source_id,
                "line": sample.line,
                "ts": ts,
                "instance": instance,
                "gpu_index": int(gpu),
                "gpu_name": sample.labels.get("modelName"),
                "gpu_uuid": sample.labels.get("UUID") or sample.labels.get("uuid"),
                "gpu_bus_id": sample.labels.get("pci_bus_id"),
                "origin": "dcgm",
            },
        )
        row[DCGM_FIELDS[sample.name].column] = value

    def _vllm(self, sample: Sample) -> None:
        """A vLLM metric sample, with all its labels."""
        ts = self._ts(sample)
        if ts is None:
            return
        self.engine.append(
            {
                "source_id": self.source_id,
                "line": sample.line,
                "ts": ts,
                "instance": self._instance(sample.labels),
                "framework": "vllm",
                "model_name": sample.labels.get("model_name"),
                "metric": sample.name,
                "value": sample.value,
                "labels": json.dumps(sample.labels, sort_keys=True),
            }
        )


def startup_scanner(options: IngestOptions) -> StartupScanner:
    """A reader of vLLM start-up memory reports for the windows of a text log's OOM scan."""
    # imported here: it brings textscan (polars, numpy), which nvidia-smi and Prometheus files never need
    from ..parse.telemetry.vllm import StartupScanner

    try:
        return StartupScanner(LineClock(options.tz))
    except (ZoneInfoNotFoundError, ValueError):
        return StartupScanner(LineClock())  # the OOM scan reports the unknown zone as the file's error


def insert_engine_memory(
    con: duckdb.DuckDBPyConnection, reports: list[StartupMemory], source_id: int, instance: str
) -> int:
    """Append the vLLM start-up memory reports of one text log to engine_memory; returns how many."""
    from ..parse.telemetry.vllm import STARTUP_COLUMNS

    labels = {"source_id": source_id, "instance": instance, "framework": "vllm"}
    rows = [{**asdict(r), **labels, "variant": r.variant or None} for r in reports]
    return insert_rows(con, "engine_memory", rows, (*labels, *STARTUP_COLUMNS))


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
