"""A database an earlier version wrote keeps working: its schema is brought up to this version's on the first
connection, read-only ones included (every command that only reads opens the file read-only)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
from click.testing import Result

from oomlab.analyses.fleet.water_levels import water_levels
from oomlab.load import sql
from oomlab.load.tables import connect

from conftest import H200

# What this version added to the schema: an earlier version's database has none of them.
NEW_VIEWS = (
    "stg_oom_events",
    "stg_job_occurrences",
    "stg_sources",
    "stg_snapshots",
    "stg_segments",
    "stg_trace_events",
    "stg_stacks",
    "stg_frames",
    "stg_snapshot_ooms",
)
NEW_MACROS = ("oomlab_water_hourly", "oomlab_block_bytes", "alert_levels", "max_hold_s", "week_origin")


def _as_an_earlier_version_left_it(db: Path) -> None:
    """Drop this version's new views and macros and stamp the schema with another version's fingerprint."""
    with duckdb.connect(str(db)) as con:
        for view in NEW_VIEWS:
            con.execute(f"DROP VIEW {view}")  # names from this test's constants
        for macro in NEW_MACROS:
            con.execute(f"DROP MACRO {'TABLE ' if macro == 'oomlab_water_hourly' else ''}{macro}")
        con.execute("COMMENT ON TABLE sources IS 'oomlab schema 0123456789abcdef'")


def _objects(db: Path) -> set[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal "
            "UNION ALL SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type LIKE '%macro' "
            "AND NOT internal"
        ).fetchall()
    return {name.lower() for (name,) in rows}


def _ingested(db: Path, run_cli: Callable[..., Result]) -> Path:
    """A database holding a real request log and its OOMs."""
    assert run_cli("ingest", H200 / "serve_mixed" / "requests.jsonl.gz", "--db", db, "--quiet").exit_code == 0
    return db


def test_a_read_only_connection_updates_an_earlier_versions_schema(db: Path, run_cli: Callable[..., Result]) -> None:
    _as_an_earlier_version_left_it(_ingested(db, run_cli))
    assert not _objects(db) & {*NEW_VIEWS, *NEW_MACROS}
    con = connect(db, read_only=True)
    try:
        assert water_levels(con).height > 0  # reads oomlab_water_hourly and the settings macros
        assert (
            con.execute("SELECT count(*) FROM stg_oom_events").fetchall()
            == con.execute("SELECT count(*) FROM oom_events").fetchall()
        )
    finally:
        con.close()
    assert _objects(db) >= {*NEW_VIEWS, *NEW_MACROS}
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'sources'").fetchall() == [
            (sql.schema_fingerprint(),)
        ]


def test_a_read_write_connection_updates_it_too(db: Path, run_cli: Callable[..., Result]) -> None:
    _as_an_earlier_version_left_it(_ingested(db, run_cli))
    connect(db).close()
    assert _objects(db) >= {*NEW_VIEWS, *NEW_MACROS}


def test_a_current_or_foreign_database_is_opened_read_only_as_it_is(db: Path, tmp_path: Path) -> None:
    connect(db).close()
    before = db.stat().st_mtime_ns
    connect(db, read_only=True).close()
    assert db.stat().st_mtime_ns == before
    foreign = tmp_path / "other.duckdb"
    with duckdb.connect(str(foreign)) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    connect(foreign, read_only=True).close()  # not an oomlab database: no schema is written into it
    assert _objects(foreign) == set()
