"""`oomlab lake export`: a database's normalized tables as a Hive-partitioned Parquet lake (docs/lake.md).

Every table is written to a staging folder inside the lake first and moved into place only when all of them
are written, so an interrupted export leaves the previous lake as it was (and a staging folder that the next
export removes), never a table half written.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import duckdb

# The tables of the lake and the time column each is partitioned by (`date=YYYY-MM-DD`, UTC), or None for a
# table written as one folder of files: the small ones (sources, calendars) and the snapshot tables, whose
# rows carry no time of their own or belong to one snapshot (a snapshot's events stay together).
LAKE_TABLES: dict[str, str | None] = {
    "sources": None,
    "requests": "ts",
    "oom_events": "ts",
    "gpu_samples": "ts",
    "gpu_process_samples": "ts",
    "engine_samples": "ts",
    "engine_memory": "ts",
    "allocator_stats": "ts",
    "rejects": None,
    "calendar_rules": None,
    "job_occurrences": "start_ts",
    "snapshots": None,
    "segments": None,
    "blocks": None,
    "trace_events": None,
    "stacks": None,
    "frames": None,
    "snapshot_ooms": None,
}
PARTITION_COLUMN = "date"
STAGING_PREFIX = ".staging-"


def export_lake(con: duckdb.DuckDBPyConnection, lake: Path) -> dict[str, int]:
    """Write every lake table of the database behind `con` under `lake`, replacing what an earlier export
    wrote there; the rows written per table."""
    lake.mkdir(parents=True, exist_ok=True)
    _remove_stale_staging(lake)
    staging = lake / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    staging.mkdir()
    try:
        rows = {table: _write_table(con, table, column, staging / table) for table, column in LAKE_TABLES.items()}
        _move_into_place(staging, lake)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return rows


def _remove_stale_staging(lake: Path) -> None:
    """Staging folders an interrupted export left behind: never read (the name starts with a dot, which
    Spark, Hive and DuckDB's globs skip), removed before the next export."""
    for stale in lake.glob(f"{STAGING_PREFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)


def _write_table(con: duckdb.DuckDBPyConnection, table: str, time_column: str | None, folder: Path) -> int:
    """One table as Parquet under `folder`: `date=YYYY-MM-DD/data_N.parquet` when it has a time column,
    `data_0.parquet` otherwise; the rows written. A table without rows still gets one file, so readers learn
    its schema. `table` and `time_column` come from LAKE_TABLES, never from input."""
    folder.mkdir()
    if time_column is not None:
        select = f'SELECT *, CAST("{time_column}" AS DATE) AS {PARTITION_COLUMN} FROM "{table}"'
        rows = _copy(con, select, folder, f", PARTITION_BY ({PARTITION_COLUMN})")
        if rows:
            return rows
    return _copy(con, f'SELECT * FROM "{table}"', folder / "data_0.parquet", "")


def _copy(con: duckdb.DuckDBPyConnection, select: str, target: Path, options: str) -> int:
    """DuckDB's COPY TO (parallel, streaming); the rows it wrote. The statement is built here, not kept in
    sql/, because COPY takes no bound parameter for its path: the path is written as an SQL string literal,
    quotes doubled."""
    literal = "'" + str(target).replace("'", "''") + "'"
    return int(
        con.execute(f"COPY ({select}) TO {literal} (FORMAT parquet, COMPRESSION zstd{options})").fetchall()[0][0]
    )


def _move_into_place(staging: Path, lake: Path) -> None:
    """Each table folder of `staging` replaces its namesake in `lake` (old one renamed aside, then removed)."""
    for folder in sorted(staging.iterdir()):
        target = lake / folder.name
        if target.exists():
            aside = staging / f".old-{folder.name}"
            target.rename(aside)
        folder.rename(target)
