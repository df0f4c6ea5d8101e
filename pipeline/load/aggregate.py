"""`oomlab aggregate --lake DIR --out AGG --engine duckdb|spark`: the aggregate tier (sql/aggregates/) computed from
a Parquet lake, written as Parquet under AGG with copies of the lake's other tables (OOM events, telemetry,
snapshots, calendars: small beside the requests), so that findings and reports read AGG alone (docs/spark.md).

AGG/
  agg_request_minutes/  agg_request_devices/ ...   one folder of Parquet files per aggregate
  oom_events/  gpu_samples/  snapshots/ ...         the lake's tables but `requests`, one folder each
  _aggregates.json                                 what wrote it: engine, lake, rows per table

On a file system the set is written into a staging folder beside AGG and renamed into place when whole: an
interrupted run leaves the previous set as it was. An object store (`s3a://`, `gs://`, `abfss://`, any URI Spark's
Hadoop file systems read) has no rename; there each run writes `AGG/run-<id>/` and then `_aggregates.json`, one
object naming that run, which is the commit point (a single PUT is atomic on S3, GCS and ADLS); runs it does not
name are deleted afterwards, and a reader follows the manifest's `run`.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from ..errors import OomlabError
from .engines import Engine, is_uri, join
from .lake import DATA_FILE, LAKE_TABLES, manifest_path
from .lake import MANIFEST as LAKE_MANIFEST
from .sql import creation_order, names_in, sql_text

RAW_TABLES = frozenset({"requests"})
MANIFEST = "_aggregates.json"
MANIFEST_LAKE_FILE = f"{LAKE_MANIFEST}/{DATA_FILE}"
# the folders of an object-store set's runs: AGG/run-<32 hex digits>/
RUN_PREFIX = "run-"
_STAGED = re.compile(r"\bstg_\w+")


def aggregate_lake(lake: Path | str, out: Path | str, engine: Engine) -> dict[str, int]:
    """Compute every aggregate of the lake at `lake` on `engine` into `out`, replacing an earlier set there; the
    rows written per table. Either may be a URI (`s3a://bucket/lake`) where the engine reads one (Spark)."""
    if is_uri(lake) or is_uri(out):
        return _aggregate_by_runs(str(lake), str(out), engine)
    lake, out = Path(lake), Path(out)
    if not manifest_path(lake).exists():
        raise OomlabError(f"no lake at {lake}: {manifest_path(lake)} is missing", hint="oomlab ingest PATHS --lake DIR")
    staging = out.parent / f".{out.name}.staging-{uuid.uuid4().hex}"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        rows = _write_set(lake, staging, engine)
        (staging / MANIFEST).write_text(json.dumps(_manifest(lake, engine, rows), indent=2) + "\n", encoding="utf-8")
        _replace(out, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return rows


def _aggregate_by_runs(lake: str, out: str, engine: Engine) -> dict[str, int]:
    """The object-store commit (module docstring): the set under `out/run-<id>/`, then the manifest naming it."""
    store = engine.store()
    if store is None:
        raise OomlabError(
            f"the {engine.name} engine reads and writes local paths only, not {lake if is_uri(lake) else out}",
            hint="--engine spark reads object stores (s3a://, gs://, abfss://); or mount the bucket",
        )
    if not store.exists(join(lake, MANIFEST_LAKE_FILE)):
        raise OomlabError(f"no lake at {lake}: {join(lake, MANIFEST_LAKE_FILE)} is missing")
    run = f"{RUN_PREFIX}{uuid.uuid4().hex}"
    rows = _write_set(lake, join(out, run), engine)
    manifest = _manifest(lake, engine, rows) | {"run": run}
    store.write_text(join(out, MANIFEST), json.dumps(manifest, indent=2) + "\n")
    for name in store.folders(out):
        if name.startswith(RUN_PREFIX) and name != run:
            store.delete(join(out, name))
    return rows


def _write_set(lake: Path | str, staging: Path | str, engine: Engine) -> dict[str, int]:
    columns = table_columns()
    for table in LAKE_TABLES:
        engine.lake_table(table, join(lake, table), columns[table])
    aggregates = names_in("aggregates")
    for view in staged_views(tuple(aggregates)):
        engine.execute(sql_text(view))
    rows = {}
    for name in aggregates:
        engine.execute(sql_text(name))
        rows[name] = engine.write(name, join(staging, name))
    for table in LAKE_TABLES:
        if table not in RAW_TABLES:
            rows[table] = engine.write(table, join(staging, table))
    return rows


def set_folder(agg: Path, manifest: dict[str, object]) -> Path:
    """Where the tables of the set at `agg` lie: beside its manifest, or in the run the manifest names."""
    run = manifest.get("run")
    if run is None:
        return agg
    if not isinstance(run, str) or not run.startswith(RUN_PREFIX) or "/" in run:
        raise OomlabError(f"aggregate set {agg}: its manifest names no run folder ({run!r})")
    return agg / run


@cache
def staged_views(aggregates: tuple[str, ...]) -> tuple[str, ...]:
    """The stg_ views the aggregates read, and those these read, in an order that creates each after what it names
    (created on the engine over the lake's tables first)."""
    needed: set[str] = set()
    pending = [v for name in aggregates for v in _STAGED.findall(_code(sql_text(name)))]
    while pending:
        view = pending.pop()
        if view not in needed:
            needed.add(view)
            pending.extend(_STAGED.findall(_code(sql_text(view))))
    return tuple(name for name in creation_order() if name in needed)


def _code(sql: str) -> str:
    return re.sub(r"--[^\n]*", " ", sql)


@cache
def table_columns() -> dict[str, dict[str, str]]:
    """Every lake table's columns and DuckDB types, as the schema (sql/tables/) declares them."""
    from .connection import connect

    with connect(":memory:") as con:
        found: dict[str, dict[str, str]] = {}
        for table, column, kind in con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
        ).fetchall():
            if table in LAKE_TABLES:
                found.setdefault(table, {})[column] = kind
    return found


def _manifest(lake: Path | str, engine: Engine, rows: dict[str, int]) -> dict[str, object]:
    return {
        "engine": engine.name,
        "lake": lake if isinstance(lake, str) else str(lake.resolve()),
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "rows": rows,
    }


def _replace(out: Path, staging: Path) -> None:
    aside = out.parent / f".{out.name}.old-{uuid.uuid4().hex}"
    if out.exists():
        out.rename(aside)
    staging.rename(out)
    shutil.rmtree(aside, ignore_errors=True)
