"""`oomlab ingest PATHS --lake DIR`: the sample fleet and real H200 captures straight into the Parquet lake, with
the database's idempotency (skip unchanged, replace changed, nothing else touched) and no partial source after an
interruption. Every check compares the lake with a database ingest of the same files, table by table."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from oomlab import api
from oomlab.cli.main import cli
from oomlab.config import IngestOptions
from oomlab.load import lake as layout

from conftest import FLEET, H200, fail_lake_write_of

SNAPSHOT = H200 / "fragmentation" / "snapshot_fragmented_oom.pickle.gz"
SERVE_MIXED = H200 / "serve_mixed" / "requests.jsonl.gz"
# Columns that differ between two ingests of the same bytes by design: when each ran.
RUN_DEPENDENT = {"ingested_at"}


def _ingest_lake(lake: Path, *paths: Path) -> None:
    report = api.ingest_lake(lake, [str(p) for p in paths], IngestOptions())
    assert not report.failed, report.failed


def _ingest_db(db: Path, *paths: Path) -> None:
    report = api.ingest(db, [str(p) for p in paths], IngestOptions())
    assert not report.failed, report.failed


def _differences(db: Path, lake: Path) -> dict[str, tuple[int, int, int]]:
    """Per table whose rows differ: (rows in the database, rows only there, rows only in the lake); the lake's
    partition columns (`date`, and `source_id` where the table has none) are read back from its folder names."""
    found = {}
    with duckdb.connect(str(db), read_only=True) as con:
        for table in layout.LAKE_TABLES:
            columns = [
                name
                for (name,) in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = $t "
                    "ORDER BY ordinal_position",
                    {"t": table},
                ).fetchall()
                if name not in RUN_DEPENDENT
            ]
            chosen = ", ".join(f'"{c}"' for c in columns)
            files = f"read_parquet('{lake / table}/**/*.parquet', hive_partitioning = true, union_by_name = true)"
            only_db, only_lake = (
                con.execute(
                    f"SELECT count(*) FROM (SELECT {chosen} FROM {a} EXCEPT ALL SELECT {chosen} FROM {b})"
                ).fetchall()[0][0]
                for a, b in ((f'"{table}"', files), (files, f'"{table}"'))
            )
            rows = con.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0]
            if only_db or only_lake:
                found[table] = (rows, only_db, only_lake)
    return found


def _files(lake: Path) -> dict[str, tuple[int, int]]:
    """Every data file of the lake with its inode and modification time: what a later ingest may not touch."""
    return {
        str(p.relative_to(lake)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in lake.glob("**/*.parquet")
        if not p.relative_to(lake).parts[0].startswith(".")
    }


@pytest.fixture(scope="module")
def fleet_lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sample fleet, a real request log and a real snapshot: as a lake, and as a database."""
    folder = tmp_path_factory.mktemp("lake")
    _ingest_lake(folder / "lake", FLEET, SERVE_MIXED, SNAPSHOT)
    _ingest_db(folder / "fleet.duckdb", FLEET, SERVE_MIXED, SNAPSHOT)
    return folder / "lake", folder / "fleet.duckdb"


def test_the_lake_holds_what_a_database_ingest_holds(fleet_lake: tuple[Path, Path]) -> None:
    lake, db = fleet_lake
    assert _differences(db, lake) == {}
    with duckdb.connect(str(db), read_only=True) as con:
        requests, traces, cron = con.execute(
            "SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM trace_events), "
            "(SELECT count(*) FROM job_occurrences WHERE origin = 'cron')"
        ).fetchall()[0]
    assert requests > 100_000 and traces > 1_000 and cron > 0  # the comparison covered real rows of each kind


def test_each_source_has_folders_of_its_own(fleet_lake: tuple[Path, Path]) -> None:
    lake, db = fleet_lake
    with duckdb.connect(str(db), read_only=True) as con:
        expected = con.execute(
            "SELECT DISTINCT CAST(ts AS DATE), source_id FROM requests WHERE source_id IN "
            "(SELECT source_id FROM sources WHERE path LIKE '%a10-01.jsonl.gz') ORDER BY 1"
        ).fetchall()
    folders = sorted((lake / "requests").glob("date=*/source_id=*"))
    assert [f"date={d}/source_id={s}" for d, s in expected] == [
        str(f.relative_to(lake / "requests")) for f in folders if f.name == f"source_id={expected[0][1]}"
    ]
    assert all([p.name for p in f.iterdir()] == ["data_0.parquet"] for f in folders)


def test_an_unchanged_file_is_skipped_and_no_file_is_rewritten(fleet_lake: tuple[Path, Path], tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(fleet_lake[0], lake)
    manifest = f"SELECT * FROM '{layout.manifest_path(lake)}' ORDER BY source_id"
    before, sources = _files(lake), duckdb.sql(manifest).fetchall()
    report = api.ingest_lake(lake, [str(FLEET), str(SERVE_MIXED), str(SNAPSHOT)], IngestOptions())
    assert {r.status for r in report.results} == {"skipped"}
    after = _files(lake)
    rewritten = {name for name in after if Path(name).name.startswith("cron_")} | {"sources/data_0.parquet"}
    assert {k: v for k, v in after.items() if k not in rewritten} == {
        k: v for k, v in before.items() if k not in rewritten
    }
    assert set(after) == set(before)  # the runs of recurring jobs are rebuilt: the same files
    assert duckdb.sql(manifest).fetchall() == sources


def _two_logs(folder: Path) -> tuple[Path, Path]:
    folder.mkdir()
    a, b = folder / "a10-01.jsonl.gz", folder / "a10-02.jsonl.gz"
    shutil.copy(FLEET / "requests" / a.name, a)
    shutil.copy(FLEET / "requests" / b.name, b)
    return a, b


def _drop_last_line(path: Path) -> None:
    """The same log a little shorter: a real change of content (the service rotated before its last line)."""
    lines = gzip.decompress(path.read_bytes()).splitlines(keepends=True)
    path.write_bytes(gzip.compress(b"".join(lines[:-1])))


def test_a_changed_file_replaces_its_own_files_and_nothing_else(tmp_path: Path) -> None:
    a, b = _two_logs(tmp_path / "logs")
    lake, db = tmp_path / "lake", tmp_path / "db.duckdb"
    _ingest_lake(lake, a, b)
    _ingest_db(db, a, b)
    b_files = {k: v for k, v in _files(lake).items() if "source_id=2/" in k}
    assert b_files
    _drop_last_line(a)
    _ingest_lake(lake, a, b)
    _ingest_db(db, a, b)
    assert _differences(db, lake) == {}
    after = _files(lake)
    assert {k: v for k, v in after.items() if "source_id=2/" in k} == b_files  # the unchanged file: untouched
    assert not [k for k in after if "source_id=1/" in k]  # the changed file's old rows are gone with their folder
    assert [k for k in after if "source_id=3/" in k]  # and its new rows have an id never used before


def test_ids_stay_unique_across_separate_ingests(tmp_path: Path) -> None:
    lake, db = tmp_path / "lake", tmp_path / "db.duckdb"
    text_log = H200 / "fragmentation" / "oom_messages.txt.gz"
    second_snapshot = H200 / "serve_leak" / "snapshot_first_oom.pickle.gz"
    for batch in ((SNAPSHOT, text_log), (second_snapshot, SERVE_MIXED)):
        _ingest_lake(lake, *batch)
        _ingest_db(db, *batch)
    assert _differences(db, lake) == {}
    for table, column in (("sources", "source_id"), ("snapshots", "snapshot_id"), ("oom_events", "event_id")):
        ids = duckdb.sql(f"SELECT {column} FROM read_parquet('{lake / table}/**/*.parquet', hive_partitioning = true)")
        values = [v for (v,) in ids.fetchall()]
        assert len(values) == len(set(values)) > 1, table


def test_recurring_jobs_cover_data_ingested_in_a_later_run(tmp_path: Path) -> None:
    """The calendar arrives first, the requests a run later: the runs of its recurring jobs still cover them."""
    lake, db = tmp_path / "lake", tmp_path / "db.duckdb"
    for batch in ((FLEET / "calendar_recurring.json",), (FLEET / "requests" / "a100-01.jsonl.gz",)):
        _ingest_lake(lake, *batch)
        _ingest_db(db, *batch)
    assert _differences(db, lake) == {}
    runs = duckdb.sql(f"SELECT count(*) FROM read_parquet('{lake}/job_occurrences/**/cron_*.parquet')").fetchall()
    assert runs[0][0] > 0


def test_an_interrupted_write_leaves_the_lake_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _two_logs(tmp_path / "logs")
    lake = tmp_path / "lake"
    _ingest_lake(lake, a)
    before = _files(lake)
    fail_lake_write_of(monkeypatch, "frames")
    with pytest.raises(KeyboardInterrupt):
        api.ingest_lake(lake, [str(b)], IngestOptions())
    assert _files(lake) == before
    assert not [p for p in lake.iterdir() if p.name.startswith(layout.STAGING_PREFIX)]


def test_files_moved_in_before_the_manifest_are_removed_by_the_next_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed between moving a source's folders into place and replacing the manifest: the folders name a
    source the manifest does not, and the next ingest deletes them before anything else."""
    a, b = _two_logs(tmp_path / "logs")
    lake, db = tmp_path / "lake", tmp_path / "db.duckdb"
    _ingest_lake(lake, a)
    _ingest_db(db, a, b)

    def killed(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(layout, "publish_manifest", killed)
    with pytest.raises(KeyboardInterrupt):
        api.ingest_lake(lake, [str(b)], IngestOptions())
    assert [k for k in _files(lake) if "source_id=2/" in k]  # the orphan is there, its source unknown
    monkeypatch.undo()
    _ingest_lake(lake, a, b)
    assert _differences(db, lake) == {}


def test_a_second_writer_is_refused_while_one_writes(tmp_path: Path) -> None:
    """Two ingests into one lake: the second would take the first one's staging folder for an interrupted write's
    and delete it, so it is refused in one line while the first holds the lake."""
    lake = tmp_path / "lake"
    _ingest_lake(lake, SERVE_MIXED)
    with layout.writing(lake):
        result = CliRunner().invoke(cli, ["ingest", str(SNAPSHOT), "--lake", str(lake), "--quiet"])
        assert result.exit_code != 0 and "is busy" in result.output and "Traceback" not in result.output
    _ingest_lake(lake, SNAPSHOT)  # free again once the first has finished
    assert layout.manifest_ids(lake) == [1, 2]


def test_db_and_lake_together_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["ingest", str(SERVE_MIXED), "--db", str(tmp_path / "x.duckdb"), "--lake", str(tmp_path / "lake")]
    )
    assert result.exit_code == 2
    assert "--db and --lake" in result.output


def test_the_cli_reports_a_lake_ingest_like_a_database_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["ingest", str(SERVE_MIXED), "--lake", str(tmp_path / "lake"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "1 ingested" in result.output
    assert (tmp_path / "lake" / "sources" / "data_0.parquet").exists()
