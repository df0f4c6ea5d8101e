"""Series (series.py) sorted into the telemetry tables as a scrape's samples are (scrape.py), column by column: a
week of one metric over a fleet is hundreds of thousands of samples, which a row at a time would spend seconds
on. DCGM fields of one GPU, MIG instance and pod at one moment make one gpu_samples row; every engine metric
sample is an engine_samples row.

The host is the one given (--instance), else the series' host label: DCGM's `Hostname` / `hostname`, or the
`node` label a Prometheus relabelling adds; a DCGM series with none of them takes Prometheus' own `instance`
label (the exporter's address: one exporter per node, so it names the node). An engine's `instance` label is
its pod's address, a process lifetime rather than a device, and is not used: an engine series that names no node
stands on its pod (`pod`, `kubernetes_pod_name`), as a pod's log that names no node does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ...records import Reject
from ...units import UNIT_BYTES
from .memory import MEMORY_COLUMNS, impossible_memory
from .prom import DCGM_FIELDS, DCGM_LABELS, FP64_BLANK, INT64_BLANK, engine_framework, engine_model, label
from .series import Series

# A node label Prometheus relabelling commonly adds (kube-prometheus' `node`, the old `kubernetes_node`).
HOST_LABELS = (*DCGM_LABELS["hostname"], "node", "kubernetes_node", "node_name")
_EXPORTER_ADDRESS = ("instance",)
# An engine's pod as Prometheus' Kubernetes discovery labels it: where no node is named, the pod stands for its device.
_POD_LABELS = ("pod", "kubernetes_pod_name", "pod_name")
_DTYPES = {"gpu_index": pl.Int32, "mig_instance_id": pl.Int32, "line": pl.Int64}
# The columns that tell one gpu_samples row from another at one moment (scrape.py's row key, as columns).
GPU_KEY = ("instance", "gpu_index", "gpu_uuid", "mig_instance_id", "pod", "namespace", "container")
_LABEL_COLUMNS = tuple(c for c in DCGM_LABELS if c not in GPU_KEY)


@dataclass
class SeriesRows:
    """The rows of many series: gpu_samples and engine_samples as frames (no source_id, origin or line order
    yet), and the rejects."""

    gpu: pl.DataFrame
    engine: pl.DataFrame
    rejects: list[Reject] = field(default_factory=list)


def series_rows(series: list[Series], instance: str | None = None) -> SeriesRows:
    """The rows of `series`; `instance` (--instance) places every row on one device."""
    gpu_parts: list[pl.DataFrame] = []
    engine_parts: list[pl.DataFrame] = []
    rejects: list[Reject] = []
    for one in series:
        if one.name in DCGM_FIELDS:
            part = _dcgm_part(one, instance, rejects)
            if part is not None:
                gpu_parts.append(part)
        elif engine_framework(one.name) and not one.name.endswith("_bucket"):
            engine_parts.append(_engine_part(one, instance))
    gpu, wrong = _gpu_rows(gpu_parts)
    engine = pl.concat(engine_parts) if engine_parts else pl.DataFrame()
    return SeriesRows(gpu, engine, rejects + wrong)


def _dcgm_part(one: Series, instance: str | None, rejects: list[Reject]) -> pl.DataFrame | None:
    """One DCGM series as (row key, moment, column, value) rows; its blank and non-finite samples are one reject."""
    gpu = one.labels.get("gpu", "")
    raw = _raw(one)
    if not gpu.isdigit():
        rejects.append(Reject(one.line, f"{one.name}: no gpu index label", raw))
        return None
    values = one.values
    blank = (values >= INT64_BLANK) | (values == FP64_BLANK) | ~np.isfinite(values)
    if blank.any():
        rejects.append(
            Reject(one.line, f"{one.name}: {int(blank.sum())} samples are DCGM's blank value or not finite", raw)
        )
        values, ts_ms = values[~blank], one.ts_ms[~blank]
    else:
        ts_ms = one.ts_ms
    spec = DCGM_FIELDS[one.name]
    if spec.unit:
        column_values = pl.Series("value", np.rint(values * UNIT_BYTES[spec.unit.lower()]), pl.Float64)
    else:
        column_values = pl.Series("value", values, pl.Float64)
    mig = one.labels.get("GPU_I_ID", "")
    host = instance or label(one.labels, HOST_LABELS) or label(one.labels, _EXPORTER_ADDRESS)
    constants = {column: label(one.labels, spellings) for column, spellings in DCGM_LABELS.items()} | {
        "instance": host,
        "gpu_index": int(gpu),
        "mig_instance_id": int(mig) if mig.isdigit() else None,
        "column": spec.column,
        "metric": one.name,
        "line": one.line,
    }
    return _samples(ts_ms, column_values, constants)


def _gpu_rows(parts: list[pl.DataFrame]) -> tuple[pl.DataFrame, list[Reject]]:
    """The (key, moment, column, value) rows as one row per key and moment, a column per field; rows whose
    memory no card can show are rejects (impossible_memory), as a scrape's are."""
    if not parts:
        return pl.DataFrame(), []
    long = pl.concat(parts, how="vertical_relaxed")
    columns = sorted(set(long["column"].unique()))
    wide = long.group_by([*GPU_KEY, "ts"], maintain_order=True).agg(
        pl.col("line").min(),
        *(pl.col(c).first() for c in _LABEL_COLUMNS),
        *(pl.col("value").filter(pl.col("column") == c).first().alias(c) for c in columns),
    )
    wide = wide.with_columns(pl.col(c).cast(pl.Int64) for c in columns if c in MEMORY_COLUMNS)
    return _possible(wide, long, columns)


def _possible(wide: pl.DataFrame, long: pl.DataFrame, columns: list[str]) -> tuple[pl.DataFrame, list[Reject]]:
    """The rows whose memory a card can show, and a reject per other row, in impossible_memory's words (each column
    named by the metric that filled it, looked up in `long` for those rows only: they are rare)."""
    memory = [c for c in columns if c in MEMORY_COLUMNS]
    suspect = pl.any_horizontal(pl.col(c) < 0 for c in memory) if memory else pl.lit(False)
    for part in ("memory_used_bytes", "memory_free_bytes"):
        if part in memory and "memory_total_bytes" in memory:
            suspect = suspect | (pl.col(part) > pl.col("memory_total_bytes"))
    flagged = wide.filter(suspect)
    if flagged.is_empty():
        return wide, []
    key = [*GPU_KEY, "ts"]
    filled_by = (
        _joinable(flagged.select(key).with_row_index("_row"))
        .join(_joinable(long.select(*key, "column", "metric")), on=key, how="left")
        .group_by("_row")
        .agg("column", "metric")
        .sort("_row")
    )
    rejects = []
    for row, filled in zip(flagged.iter_rows(named=True), filled_by.iter_rows(named=True), strict=True):
        reason = impossible_memory(row, dict(zip(filled["column"], filled["metric"], strict=True)))
        rejects.append(Reject(row["line"], reason or "impossible memory", json.dumps(row, default=str)))
    return wide.filter(~suspect), rejects


def _joinable(frame: pl.DataFrame) -> pl.DataFrame:
    """The row key with its NULLs as values a label never has (an empty label is no label; no index is negative),
    so that rows naming no pod or MIG instance join as equal."""
    return frame.with_columns(
        *(pl.col(c).fill_null("") for c in GPU_KEY if frame.schema[c] == pl.String),
        *(pl.col(c).fill_null(-1) for c in GPU_KEY if frame.schema[c] != pl.String),
    )


def _engine_part(one: Series, instance: str | None) -> pl.DataFrame:
    """One engine metric series: a row per sample, with all its labels."""
    framework = engine_framework(one.name)
    constants = {
        "instance": instance or label(one.labels, HOST_LABELS) or label(one.labels, _POD_LABELS),
        "framework": framework,
        "model_name": engine_model(framework, one.labels),
        "metric": one.name,
        "labels": json.dumps(one.labels, sort_keys=True),
        "line": one.line,
    }
    return _samples(one.ts_ms, pl.Series("value", one.values, pl.Float64), constants)


def _samples(ts_ms: np.ndarray, values: pl.Series, constants: dict[str, object]) -> pl.DataFrame:
    """A series' samples (time, value) with what is the same for all of them as columns."""
    frame = pl.DataFrame({"ts": pl.Series("ts", ts_ms, pl.Int64).cast(pl.Datetime("ms")), "value": values})
    return frame.with_columns(
        pl.lit(value, dtype=_DTYPES.get(name, pl.String)).alias(name) for name, value in constants.items()
    )


def _raw(one: Series) -> str:
    """The series as exposition text names it (a reject's raw text)."""
    labels = ",".join(f'{k}="{v}"' for k, v in sorted(one.labels.items()))
    return f"{one.name}{{{labels}}}"
