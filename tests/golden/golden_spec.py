"""What the golden tests compare: the views and findings of the bundled sample data, read and stored one way.

Shared by `test_golden.py` (compares) and `regenerate.py` (writes); see README.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from oomlab import api
from oomlab.assets import asset_dir
from oomlab.config import IngestOptions

HERE = Path(__file__).parent
VIEWS_DIR = HERE / "views"
FINDINGS_FILE = HERE / "findings.json"
REGENERATE = "python tests/golden/regenerate.py"

# DuckDB's parallel sums differ in the last bits from run to run; nothing here is exact to better than this.
REL_TOL = 1e-9
ABS_TOL = 0.0


@dataclass(frozen=True)
class GoldenView:
    """One view compared whole: `key` orders its rows and names a row in a diff (unique per row)."""

    name: str
    key: tuple[str, ...]


# The views the analyses and reports read, small enough to commit (about 1.5 MB together). Left out: the
# per-request and per-event views (fct_water_requests, fct_prompt_requests, fct_traffic_events,
# fct_traffic_dimensions, fct_traffic_minutes, fct_job_minutes, fct_snapshot_timeline,
# fct_snapshot_block_events: 70k-1.2M rows, up to 4.7 MB each), whose aggregates below (and the findings) carry
# their results, and the stg_ views, which only rename and clean the tables.
VIEWS: tuple[GoldenView, ...] = (
    GoldenView("rpt_oom_rate_by_dimension", ("dimension", "key")),
    GoldenView("rpt_oom_rate_weekly", ("week_start",)),
    GoldenView("rpt_snapshot_top_sites", ("snapshot_id", "rank")),
    GoldenView("rpt_sources", ("source_id",)),
    GoldenView("fct_oom_context", ("event_id",)),
    GoldenView("fct_oom_instance_limits", ("instance", "gpu_index")),
    GoldenView("fct_oom_neighbours_seen", ("event_id",)),
    GoldenView("fct_oom_token_cost", ("model_version",)),
    GoldenView("fct_prompt_capacity", ("instance", "gpu_index")),
    GoldenView("fct_request_baselines", ("instance", "gpu_index", "lifetime", "bucket")),
    GoldenView("fct_leak_windows", ("instance", "gpu_index", "lifetime", "window_index")),
    GoldenView("fct_water_hourly", ("instance", "gpu_index", "hour", "lifetime")),
    GoldenView("fct_traffic_exposure", ("instance", "minute")),
    GoldenView("fct_job_windows", ("name", "host", "start_ts")),
    GoldenView("fct_snapshot_state", ("snapshot_id",)),
    GoldenView("fct_snapshot_pools", ("snapshot_id", "device", "pool")),
    GoldenView("fct_snapshot_devices", ("snapshot_id", "device")),
    GoldenView("fct_snapshot_sites", ("snapshot_id", "site")),
    GoldenView("fct_snapshot_live_blocks", ("snapshot_id", "block_id")),
)


def ingest_samples(db_path: Path) -> None:
    """Ingest the bundled sample logs into a fresh database, as `oomlab demo` does (`api.demo`)."""
    samples = asset_dir("sample_logs")
    report = api.ingest(db_path, [str(samples / "fleet"), str(samples / "h200")], IngestOptions())
    failed = [f"{r.path}: {r.message}" for r in report.failed]
    assert not failed, "the bundled samples did not ingest:\n" + "\n".join(failed)


def connect(db_path: Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection in UTC, the time zone oomlab's own connections use."""
    con = duckdb.connect(str(db_path), read_only=True)
    con.execute("SET TimeZone = 'UTC'")
    return con


def read_view(con: duckdb.DuckDBPyConnection, view: GoldenView) -> pl.DataFrame:
    """The view's rows in key order, without machine-dependent columns."""
    frame = con.view(view.name).pl()
    if view.name == "rpt_sources":
        # `ingested_at` is the wall clock of the ingest and `path` an absolute path into this checkout or
        # installation; the path below the bundled sample_logs/ folder is kept in `path`'s place.
        frame = frame.drop("ingested_at").with_columns(
            pl.col("path").map_elements(_sample_path, return_dtype=pl.String).alias("path")
        )
    return frame.sort(view.key, nulls_last=True)


def _sample_path(path: str) -> str:
    samples = asset_dir("sample_logs")
    for base in (samples, samples.resolve()):
        if Path(path).is_relative_to(base):
            return Path(path).relative_to(base).as_posix()
    return path  # outside the samples: left absolute, so the comparison shows it


def golden_file(view: GoldenView) -> Path:
    """Where the view's expected rows are committed."""
    return VIEWS_DIR / f"{view.name}.parquet"


def write_view(frame: pl.DataFrame, view: GoldenView) -> None:
    """Commit-ready Parquet (keeps the dtypes); zstd keeps the folder small."""
    keys = frame.select(view.key).rows()
    if len(set(keys)) != len(keys):
        raise ValueError(f"{view.name}: key {view.key} is not unique; choose a key that names one row")
    frame.write_parquet(golden_file(view), compression="zstd", compression_level=19)


def findings_json(db_path: Path) -> list[dict[str, Any]]:
    """`api.findings` over all the data, as the JSON a consumer reads (round-tripped: lists, not tuples)."""
    return json.loads(json.dumps([f.to_json() for f in api.findings(db_path)]))


def dump_findings(findings: list[dict[str, Any]]) -> str:
    """The committed text of findings.json: stable key order so a regeneration diffs line by line."""
    return json.dumps(findings, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def frame_differences(expected: pl.DataFrame, actual: pl.DataFrame, key: tuple[str, ...], limit: int = 5) -> str:
    """Which columns and rows differ, by key, floats within REL_TOL; empty when none found."""
    lines = _schema_differences(expected, actual)
    exp_keys, act_keys = expected.select(key).rows(), actual.select(key).rows()
    exp_set, act_set = set(exp_keys), set(act_keys)
    missing = [k for k in exp_keys if k not in act_set]
    extra = [k for k in act_keys if k not in exp_set]
    for label, rows in (("missing (expected, not produced)", missing), ("unexpected (produced, not expected)", extra)):
        if rows:
            lines.append(f"{len(rows)} row(s) {label}, e.g. {_names(key, rows[:limit])}")
    common = exp_set & act_set
    expected = expected.filter(pl.Series([k in common for k in exp_keys], dtype=pl.Boolean))
    actual = actual.filter(pl.Series([k in common for k in act_keys], dtype=pl.Boolean))
    for column in (c for c in expected.columns if c in actual.columns and c not in key):
        lines += _column_differences(expected, actual, key, column, limit)
    return "\n".join(lines)


def _schema_differences(expected: pl.DataFrame, actual: pl.DataFrame) -> list[str]:
    lines = []
    if missing := [c for c in expected.columns if c not in actual.columns]:
        lines.append(f"columns missing: {missing}")
    if extra := [c for c in actual.columns if c not in expected.columns]:
        lines.append(f"columns unexpected: {extra}")
    for column in (c for c in expected.columns if c in actual.columns):
        if expected.schema[column] != actual.schema[column]:
            lines.append(f"column {column}: dtype {actual.schema[column]}, expected {expected.schema[column]}")
    return lines


def _column_differences(
    expected: pl.DataFrame, actual: pl.DataFrame, key: tuple[str, ...], column: str, limit: int
) -> list[str]:
    want, got = expected[column], actual[column]
    if want.dtype != got.dtype:
        return []  # reported by _schema_differences; values of different types are not compared
    if want.dtype.is_float():
        close = (want - got).abs() <= ABS_TOL + REL_TOL * want.abs()
        same = (close | (want.is_nan() & got.is_nan())).fill_null(False) | (want.is_null() & got.is_null())
    else:
        same = want.eq_missing(got)
    rows = (~same).arg_true().to_list()
    if not rows:
        return []
    keys = expected.select(key).rows()
    shown = [f"    {_names(key, [keys[i]])}: expected {_show(want[i])}, got {_show(got[i])}" for i in rows[:limit]]
    return [f"column {column}: {len(rows)} of {len(want)} rows differ", *shown]


def _names(key: tuple[str, ...], rows: list[tuple[object, ...]]) -> str:
    return "; ".join(", ".join(f"{k}={_show(v)}" for k, v in zip(key, row, strict=True)) for row in rows)


def _show(value: object) -> str:
    """Strings quoted (so '' and None differ), everything else as printed (`2026-11-09 00:00:00`)."""
    if isinstance(value, pl.Series):  # a list column's cell
        value = value.to_list()
    return repr(value) if isinstance(value, str) else str(value)


def json_differences(expected: object, actual: object, path: str = "findings") -> Iterator[str]:
    """Each place the findings differ (`findings[2].metrics.lift: expected 9.12, got 9.5`), floats within REL_TOL."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for name in sorted(expected.keys() | actual.keys()):
            if name not in actual or name not in expected:
                yield f"{path}.{name}: {'missing' if name not in actual else 'unexpected'}"
            else:
                yield from json_differences(expected[name], actual[name], f"{path}.{name}")
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            yield f"{path}: {len(actual)} items, expected {len(expected)}"
        for i, (want, got) in enumerate(zip(expected, actual, strict=False)):
            yield from json_differences(want, got, f"{path}[{i}]{_label(want)}")
    elif not _same_value(expected, actual):
        yield f"{path}: expected {expected!r}, got {actual!r}"


def _label(item: object) -> str:
    """` (leak: gpu-a-0)` after a finding's index, so a diff names the finding, not just its rank."""
    if isinstance(item, dict) and "kind" in item and "subject" in item:
        return f" ({item['kind']}: {item['subject']})"
    return ""


def _same_value(expected: object, actual: object) -> bool:
    if type(expected) is not type(actual):
        return False
    if isinstance(expected, float) and isinstance(actual, float):
        both_nan = math.isnan(expected) and math.isnan(actual)
        return both_nan or math.isclose(expected, actual, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return expected == actual
