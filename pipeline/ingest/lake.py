"""`oomlab ingest PATHS --lake DIR` and `oomlab pull prometheus --lake DIR`: files, or a pull, straight into the
Parquet lake (load/lake.py, docs/lake.md).

The files are ingested into a working DuckDB file inside the lake's staging folder, by the same per-file loop
as a database (ingest/run.py), after it has been given what that loop consults of the rest of the lake: the
manifest (so an unchanged file is skipped, a changed one replaced, a copy of another noted), the highest ids
(so new ones are unique across the lake), the recurring jobs and one sample per GPU. Only the rows of the
sources this run wrote go back to the lake, each source in folders of its own; the manifest moves last.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import duckdb

from ..config import IngestOptions
from ..load import lake as layout
from ..load.connection import connect
from ..load.sql import bind, run_file, sql_text
from ..records import IngestReport
from .ahead import Ahead
from .calendar import refresh_rule_occurrences
from .paths import InputFile
from .progress import Progress
from .prometheus_pull import PullReport, PullRequest, pull_prometheus
from .run import ingest_files

WORK_DB = "work.duckdb"
T = TypeVar("T")


def ingest_into_lake(
    lake: Path,
    files: list[InputFile],
    options: IngestOptions,
    progress: Progress | None = None,
    ahead: Ahead | None = None,
) -> IngestReport:
    """Ingest `files` into the lake at `lake`; the same report as a database ingest."""
    with layout.writing(lake):
        return _into_lake(lake, lambda con: ingest_files(con, files, options, progress, ahead))


def pull_into_lake(lake: Path, request: PullRequest) -> PullReport:
    """`oomlab pull prometheus --lake`: the pull into the working database, which holds the lake's own samples of
    the range first, so that a sample the lake holds is not added again; then its rows into the lake."""

    def pull(con: duckdb.DuckDBPyConnection) -> PullReport:
        since, until = request.since, request.until
        for table in ("gpu_samples", "engine_samples"):
            if any((lake / table).rglob("*.parquet")):
                run_file(con, f"lake_seed_{table}_range", {"glob": _glob(lake, table), "since": since, "until": until})
        return pull_prometheus(con, request)

    with layout.writing(lake):
        return _into_lake(lake, pull)


def _into_lake(lake: Path, work: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    """Run `work` on a working database seeded from the lake; then the rows of the sources it wrote into the lake,
    the runs of recurring jobs rebuilt over the lake's time, and the manifest last."""
    layout.prepare(lake)
    staging = layout.new_staging(lake)
    try:
        with connect(staging / WORK_DB) as con:
            known = _seed(con, lake)
            result = work(con)
            refresh_rule_occurrences(con, _lake_time(con, lake))
            current = _source_ids(con)
            out = staging / "out"
            out.mkdir()
            layout.write_source_rows(con, out, sorted(current - known))
            layout.write_cron_occurrences(con, out)
            layout.write_manifest(con, out)
            layout.merge_into_lake(con, out, lake, known - current)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result


def _glob(lake: Path, table: str) -> str:
    return str(lake / table / "**" / "*.parquet")


def _seed(con: duckdb.DuckDBPyConnection, lake: Path) -> set[int]:
    """Give the working database what the per-file loop consults of the lake; the source ids it already holds."""
    manifest = layout.manifest_path(lake)
    if not manifest.exists():
        return set()
    globs = {table: _glob(lake, table) for table in layout.LAKE_TABLES}
    run_file(con, "lake_seed_sources", {"manifest": str(manifest)})
    max_ids = _row(
        con, "lake_max_ids", {"manifest": str(manifest), "snapshots": globs["snapshots"], "events": globs["oom_events"]}
    )
    run_file(con, "lake_advance_ids", dict(zip(("sources", "snapshots", "events"), max_ids, strict=True)))
    for table in ("calendar_rules", "gpu_samples", "gpu_process_samples"):
        run_file(con, f"lake_seed_{table}", {"glob": globs[table]})
    return _source_ids(con)


def _source_ids(con: duckdb.DuckDBPyConnection) -> set[int]:
    return {r[0] for r in con.execute("SELECT source_id FROM sources").fetchall()}


def _row(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, object]) -> tuple[object, ...]:
    text = sql_text(name)
    return con.execute(text, bind(text, params)).fetchall()[0]


def _lake_time(con: duckdb.DuckDBPyConnection, lake: Path) -> tuple[datetime | None, datetime | None]:
    """The time the lake's requests and OOM events cover (none for a new lake)."""
    if not layout.manifest_path(lake).exists():
        return None, None
    low, high = _row(
        con, "select_lake_data_range", {"requests": _glob(lake, "requests"), "ooms": _glob(lake, "oom_events")}
    )
    return low, high  # type: ignore[return-value]
