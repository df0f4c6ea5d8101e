"""Prometheus series (API answers saved to files, VictoriaMetrics exports, and what `oomlab pull prometheus`
fetches) into gpu_samples and engine_samples. A sample already held is not added again (sql/ingest/
merge_gpu_series.sql): ranges pulled twice, or an answer ingested beside the pull it came from, keep one copy."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import polars as pl

from ..errors import InputError
from ..load import tables as load
from ..load.sql import run_file, sql_text
from ..parse import bounded
from ..parse.compression import READ_ERRORS, open_binary
from ..parse.telemetry.memory import MEMORY_COLUMNS
from ..parse.telemetry.naming import file_instance
from ..parse.telemetry.prom import DCGM_FIELDS
from ..parse.telemetry.series import PROM_API, read_api_answer, read_vm_export
from ..parse.telemetry.series_rows import SeriesRows, series_rows
from ..records import Reject

if TYPE_CHECKING:
    from .job import LoadJob

# The origin of DCGM rows, as a scrape's (formats.PROMETHEUS): where they came from is the source's kind.
DCGM_ORIGIN = "dcgm"

# The gpu_samples columns a DCGM field fills, each present for the merge whether pulled or not: bytes are whole
# numbers, the rest (utilisation, temperature, power) floats.
_GPU_VALUES = {spec.column: pl.Int64 if spec.column in MEMORY_COLUMNS else pl.Float64 for spec in DCGM_FIELDS.values()}


def load_job(job: LoadJob) -> tuple[int, int]:
    """A saved API answer's or VictoriaMetrics export's loader (parse/formats.py)."""
    try:
        series, rejects = _read(job.path, job.kind)
    except READ_ERRORS as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(str(job.path), f"cannot read: {reason}") from exc
    rows = series_rows(series, job.options.instance)
    inserted = insert_series(job.con, rows, job.source_id, fallback=file_instance(job.path))
    return inserted, load.insert_rejects(job.con, job.source_id, rejects + rows.rejects)


def _read(path: Path, kind: str) -> tuple[list, list[Reject]]:
    with open_binary(path) as handle:
        if kind == PROM_API:
            data = bounded.read_bounded(handle)  # an answer is decoded whole
            if data is None:
                raise InputError(str(path), f"an API answer over {bounded.bound_text()} is not read whole")
            return read_api_answer(data.decode("utf-8", errors="replace"))
        found = list(read_vm_export(raw.decode("utf-8", errors="replace") for raw in handle))
    return [s for s in found if not isinstance(s, Reject)], [r for r in found if isinstance(r, Reject)]


def insert_series(con: duckdb.DuckDBPyConnection, rows: SeriesRows, source_id: int, fallback: str | None) -> int:
    """Add the series rows to their tables (rows naming no host go on `fallback`); returns how many rows are
    new (a sample already held is not counted twice)."""
    added = 0
    if rows.gpu.height:
        gpu = _placed(rows.gpu, source_id, fallback).with_columns(
            pl.lit(DCGM_ORIGIN).alias("origin"),
            *(pl.lit(None, dtype).alias(c) for c, dtype in _GPU_VALUES.items() if c not in rows.gpu.columns),
        )
        added += _merge(con, gpu, "new_gpu_series", ("merge_gpu_series", "insert_gpu_series"))
    if rows.engine.height:
        engine = _placed(rows.engine, source_id, fallback)
        added += _merge(con, engine, "new_engine_series", ("insert_engine_series",))
    return added


def _placed(frame: pl.DataFrame, source_id: int, fallback: str | None) -> pl.DataFrame:
    return frame.with_columns(
        pl.lit(source_id, pl.Int32).alias("source_id"),
        pl.col("instance").fill_null(pl.lit(fallback, pl.String)),
        pl.col("ts").cast(pl.Datetime("us")),
    )


def _merge(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame, name: str, files: tuple[str, ...]) -> int:
    """Run the merge files over `frame` staged as `name`; returns how many rows the last one inserted."""
    con.register(name, frame.to_arrow())
    try:
        for sql_file in files[:-1]:
            run_file(con, sql_file)
        return int(con.execute(sql_text(files[-1])).fetchone()[0])
    finally:
        con.unregister(name)
