"""`oomlab lake export`: the sample fleet (and a real H200 snapshot) as Hive-partitioned Parquet, read back."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from oomlab import api
from oomlab.cli.main import cli
from oomlab.load.lake import LAKE_TABLES, STAGING_PREFIX

from conftest import H200, fail_lake_write_of

SNAPSHOT = H200 / "fragmentation" / "snapshot_fragmented_oom.pickle.gz"


@pytest.fixture(scope="module")
def snapshot_db(tmp_path_factory) -> Path:
    """A database holding one real snapshot (the fragmentation capture's OOM moment)."""
    path = tmp_path_factory.mktemp("snap") / "snap.duckdb"
    result = CliRunner().invoke(cli, ["ingest", str(SNAPSHOT), "--db", str(path), "--quiet"])
    assert result.exit_code == 0, result.output
    return path


def _lake_rows(lake: Path, table: str) -> int:
    glob = str(lake / table / "**" / "*.parquet")
    return duckdb.sql(f"SELECT count(*) FROM read_parquet('{glob}', hive_partitioning = true)").fetchall()[0][0]


def _db_rows(db: Path, table: str) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0]


def test_every_table_is_written_and_reads_back_whole(fleet_db: Path, tmp_path: Path) -> None:
    rows = api.lake_export(fleet_db, tmp_path / "lake")
    assert set(rows) == set(LAKE_TABLES)
    assert rows["requests"] > 100_000  # the sample fleet and the real H200 request logs
    for table in LAKE_TABLES:
        assert rows[table] == _db_rows(fleet_db, table) == _lake_rows(tmp_path / "lake", table), table


def test_requests_are_partitioned_by_their_utc_date(fleet_db: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    api.lake_export(fleet_db, lake)
    folders = sorted(p.name for p in (lake / "requests").iterdir())
    with duckdb.connect(str(fleet_db), read_only=True) as con:
        days = [
            f"date={d}" for (d,) in con.execute("SELECT DISTINCT CAST(ts AS DATE) FROM requests ORDER BY 1").fetchall()
        ]
    assert folders == days
    glob = str(lake / "requests" / "**" / "*.parquet")
    wrong = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{glob}', hive_partitioning = true) WHERE CAST(ts AS DATE) <> date"
    ).fetchall()[0][0]
    assert wrong == 0


def test_sources_manifest_carries_each_files_content_hash(fleet_db: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    api.lake_export(fleet_db, lake)
    query = "SELECT path, content_hash, hash_algorithm FROM {} ORDER BY path"
    with duckdb.connect(str(fleet_db), read_only=True) as con:
        expected = con.execute(query.format("sources")).fetchall()
    manifest = duckdb.sql(query.format(f"read_parquet('{lake / 'sources' / 'data_0.parquet'}')")).fetchall()
    assert manifest == expected
    assert {algorithm for _, _, algorithm in manifest} == {"xxh3-128"}


def test_a_real_snapshot_is_exported_with_its_trace(snapshot_db: Path, tmp_path: Path) -> None:
    rows = api.lake_export(snapshot_db, tmp_path / "lake")
    assert rows["snapshots"] == 1
    for table in ("segments", "blocks", "trace_events", "stacks", "frames"):
        assert rows[table] > 0, table
        assert _lake_rows(tmp_path / "lake", table) == rows[table]
    assert rows["requests"] == 0
    # An empty table still has a file, so a reader learns its columns.
    empty = tmp_path / "lake" / "requests" / "data_0.parquet"
    columns = [name for name, *_ in duckdb.sql(f"DESCRIBE SELECT * FROM '{empty}'").fetchall()]
    assert "request_id" in columns and "input_sequence_length" in columns


def test_a_second_export_replaces_the_first(snapshot_db: Path, fleet_db: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    api.lake_export(fleet_db, lake)
    api.lake_export(snapshot_db, lake)
    assert _lake_rows(lake, "requests") == 0
    assert _lake_rows(lake, "trace_events") == _db_rows(snapshot_db, "trace_events")
    assert not [p for p in lake.iterdir() if p.name.startswith(STAGING_PREFIX)]


def test_an_interrupted_export_leaves_the_previous_lake_whole(
    snapshot_db: Path, fleet_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = tmp_path / "lake"
    api.lake_export(snapshot_db, lake)
    fail_lake_write_of(monkeypatch, "frames")
    with pytest.raises(KeyboardInterrupt):
        api.lake_export(fleet_db, lake)
    assert _lake_rows(lake, "requests") == 0  # still the snapshot database's lake
    assert _lake_rows(lake, "trace_events") == _db_rows(snapshot_db, "trace_events")
    assert not [p for p in lake.iterdir() if p.name.startswith(STAGING_PREFIX)]


def test_cli_names_the_tables_it_wrote(snapshot_db: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["lake", "export", str(tmp_path / "lake"), "--db", str(snapshot_db)])
    assert result.exit_code == 0, result.output
    assert "written to" in result.output and "trace_events:" in result.output
    assert "requests:" not in result.output  # nothing written is not listed as a table of rows


def test_a_missing_database_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["lake", "export", str(tmp_path / "lake"), "--db", str(tmp_path / "none.duckdb")])
    assert result.exit_code != 0
    assert "no database at" in result.output
    assert "Traceback" not in result.output
