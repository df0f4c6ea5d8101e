"""The aggregate tier (sql/aggregates/) on both engines: `oomlab aggregate --engine duckdb|spark` over the bundled
sample fleet's lake (plus the real H200 request logs) yields the same tables as each other and as the database's own
agg_ views, the single-database path.

Floats are compared with a relative tolerance of 1e-6: the least-squares intercepts of agg_token_cost subtract two
nearly equal sums, so the two engines' different summation orders differ in the 9th digit (2.3e-9 seen); counts,
bytes, times and exact percentiles are compared exactly. Spark runs in local mode with two threads; without pyspark
and Java (the spark extra) the Spark half is skipped, except in CI (OOMLAB_REQUIRE_SPARK=1), where it fails.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner
from polars.testing import assert_frame_equal

from oomlab import api
from oomlab.cli.main import cli
from oomlab.config import IngestOptions
from oomlab.load.aggregate import MANIFEST, RAW_TABLES, aggregate_lake, table_columns
from oomlab.load.lake import LAKE_TABLES
from oomlab.load.sql import names_in

from conftest import H200, needs_spark, read_jsonl_gz

AGGREGATES = names_in("aggregates")
FLOAT_TOLERANCE = 1e-6


def _frame(folder: Path) -> pl.DataFrame:
    frame = duckdb.sql(f"SELECT * FROM read_parquet('{folder}/*.parquet')").pl()
    return _sorted(frame)


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows in one order whatever the engine wrote: by every column that sorts (lists aside; a struct sorts by its
    fields)."""
    keys = [c for c, t in frame.schema.items() if not isinstance(t, pl.List)]
    return frame.sort(keys, nulls_last=True)


def _assert_same(left: pl.DataFrame, right: pl.DataFrame, name: str) -> None:
    assert left.columns == right.columns, name
    assert_frame_equal(left, right, check_dtypes=True, rel_tol=FLOAT_TOLERANCE, abs_tol=0.0)


def _implausible_copy(folder: Path) -> Path:
    """The real H200 serve_mixed request log with three lines made implausible, the rest as captured (derived, so
    that agg_request_flags has rows): line 3 took 2 days, line 5 states its card in MiB (143771), line 8 a card of
    1 PiB."""
    rows = read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")
    rows[2]["latency_ms"] = 172_800_000
    rows[4]["device_total"] = 143_771
    rows[7]["device_total"] = 1 << 50
    path = folder / "serve_mixed_implausible.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def fleet_copy(fleet_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample fleet's database plus the implausible copy: what the lake below holds."""
    folder = tmp_path_factory.mktemp("agg")
    db = folder / "fleet.duckdb"
    shutil.copy(fleet_db, db)
    report = api.ingest(db, [str(_implausible_copy(folder))], IngestOptions())
    assert not report.failed
    return db


@pytest.fixture(scope="module")
def fleet_lake(fleet_copy: Path) -> Path:
    lake = fleet_copy.parent / "lake"
    api.lake_export(fleet_copy, lake)
    return lake


@pytest.fixture(scope="module")
def duckdb_set(fleet_lake: Path) -> Path:
    out = fleet_lake.parent / "agg-duckdb"
    api.aggregate(fleet_lake, out, "duckdb")
    return out


@pytest.fixture(scope="module")
def spark_set(fleet_lake: Path, spark) -> Path:
    from oomlab.load.engines import SparkEngine

    out = fleet_lake.parent / "agg-spark"
    aggregate_lake(fleet_lake, out, SparkEngine(session=spark))
    return out


def test_duckdb_aggregates_equal_the_databases_own(duckdb_set: Path, fleet_copy: Path) -> None:
    with duckdb.connect(str(fleet_copy), read_only=True) as con:
        for name in AGGREGATES:
            expected = _sorted(con.sql(f"SELECT * FROM {name}").pl())
            assert expected.height > 0, name  # every aggregate has rows on the sample fleet
            _assert_same(expected, _frame(duckdb_set / name), name)


@needs_spark
@pytest.mark.parametrize("name", AGGREGATES)
def test_spark_computes_every_aggregate_as_duckdb_does(duckdb_set: Path, spark_set: Path, name: str) -> None:
    _assert_same(_frame(duckdb_set / name), _frame(spark_set / name), name)


@needs_spark
def test_spark_copies_the_small_tables_whole(duckdb_set: Path, spark_set: Path) -> None:
    for table in LAKE_TABLES:
        if table in RAW_TABLES:
            assert not (spark_set / table).exists()
            continue
        duck, spark = _frame(duckdb_set / table), _frame(spark_set / table)
        assert list(duck.columns) == list(table_columns()[table]), table
        _assert_same(duck, spark, table)


def _on_both_engines(spark, values: list[int], query: str) -> tuple[list[tuple], list[tuple]]:
    """`query` over a table `numbers` of one BIGINT column `x` holding `values`, on DuckDB and on Spark: the rows of
    each."""
    from oomlab.load.engines import DuckDBEngine, SparkEngine

    duck = DuckDBEngine()
    duck.con.execute("CREATE TABLE numbers AS SELECT unnest($v::BIGINT[]) AS x", {"v": values})
    duck.execute(f"CREATE OR REPLACE VIEW answers AS {query}")
    expected = duck.con.execute("SELECT * FROM answers").fetchall()
    duck.close()
    spark.createDataFrame([(v,) for v in values], "x BIGINT").createOrReplaceTempView("numbers")
    SparkEngine(session=spark).execute(f"CREATE OR REPLACE VIEW answers AS {query}")
    return expected, [tuple(r) for r in spark.table("answers").collect()]


@needs_spark
def test_power_of_two_buckets_agree_at_every_boundary(spark) -> None:
    """Spark's log2 is ln x / ln 2 (log2(8) = 2.9999999999999996): oomlab_pow2_bucket corrects the guess, so both
    engines put 2^k - 1, 2^k and 2^k + 1 in the same bucket for every k up to 2^49."""
    values = sorted({0, *(v for k in range(50) for v in (2**k - 1, 2**k, 2**k + 1) if v >= 0)})
    expected, got = _on_both_engines(spark, values, "SELECT x, oomlab_pow2_bucket(x) AS bucket FROM numbers ORDER BY x")
    assert got == expected
    assert all(b <= x < 2 * b for x, b in expected if x > 0) and expected[0] == (0, 0)


def test_the_set_says_what_wrote_it(duckdb_set: Path, fleet_lake: Path) -> None:
    manifest = json.loads((duckdb_set / MANIFEST).read_text())
    assert manifest["engine"] == "duckdb" and manifest["lake"] == str(fleet_lake.resolve())
    assert set(manifest["rows"]) == set(AGGREGATES) | set(LAKE_TABLES) - RAW_TABLES
    assert manifest["rows"]["agg_request_devices"] == _frame(duckdb_set / "agg_request_devices").height


def test_the_aggregates_are_bounded_by_devices_and_minutes_not_requests(duckdb_set: Path, fleet_copy: Path) -> None:
    with duckdb.connect(str(fleet_copy), read_only=True) as con:
        requests, devices, minutes = con.execute(
            "SELECT count(*), count(DISTINCT (instance, gpu_index)), "
            "count(DISTINCT (instance, gpu_index, date_trunc('minute', ts))) FROM stg_requests"
        ).fetchall()[0]
    assert _frame(duckdb_set / "agg_request_devices").height == devices
    assert _frame(duckdb_set / "agg_request_minutes").height == minutes < requests


def test_stg_requests_names_every_column_of_requests() -> None:
    """stg_requests lists its columns (Spark has no `* REPLACE`): a column added to `requests` must be added there."""
    from oomlab.load.connection import connect

    with connect(":memory:") as con:
        staged = [r[0] for r in con.execute("DESCRIBE stg_requests").fetchall()]
    assert set(table_columns()["requests"]) <= set(staged)


def test_cli_aggregates_a_lake(fleet_lake: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["aggregate", "--lake", str(fleet_lake), "--out", str(tmp_path / "agg")])
    assert result.exit_code == 0, result.output
    assert f"{len(AGGREGATES)} aggregates" in result.output and "agg_request_minutes:" in result.output
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_a_folder_that_is_no_lake_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["aggregate", "--lake", str(tmp_path), "--out", str(tmp_path / "agg")])
    assert result.exit_code != 0
    assert "no lake at" in result.output and "Traceback" not in result.output


def test_master_without_spark_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["aggregate", "--lake", str(tmp_path), "--out", str(tmp_path / "a"), "--master", "local[4]"]
    )
    assert result.exit_code == 2 and "--engine spark" in result.output


@needs_spark
def test_sample_cuts_agree_and_keep_their_share(spark) -> None:
    """agg_prompt_sample keeps a day's keys below oomlab_sample_cut(n, keep): the same text on both engines, from
    a day a little over `keep` to a fleet's 3.5 billion requests, and a share of 16^15 within one step of keep / n."""
    counts = [99_999, 100_000, 100_001, 1_000_003, 87_654_321, 3_500_000_000, 2**62]
    query = "SELECT x, oomlab_sample_cut(x, 100000) AS cut FROM numbers ORDER BY x"
    expected, got = _on_both_engines(spark, counts, query)
    assert got == expected
    assert [cut for n, cut in expected if n <= 100_000] == [None, None]
    for n, cut in expected[2:]:
        assert len(cut) == 15 and cut == cut.lower()
        assert abs(int(cut, 16) - 100_000 / n * 16**15) <= 1 + 16**15 * 1e-15


def _findings_json(result) -> list[dict]:
    """The findings as `oomlab findings --json` writes them, floats to 9 significant digits (sums over Parquet
    files may add in another order), with the data-quality note."""

    def rounded(value):
        if isinstance(value, float):
            return float(f"{value:.9g}")
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rounded(v) for v in value]
        return value

    note = result.data_quality and result.data_quality.to_json()
    return rounded([*(f.to_json() for f in result), note])


@pytest.fixture(scope="module")
def database_findings(fleet_copy: Path) -> list[dict]:
    return _findings_json(api.findings(fleet_copy))


def test_findings_on_duckdbs_aggregates_equal_the_databases(duckdb_set: Path, database_findings: list[dict]) -> None:
    """Same kinds, subjects, ranks, evidence, advice and numbers: every analysis reads the aggregate tier."""
    found = _findings_json(api.findings(None, aggregates=duckdb_set))
    assert len(found) > 5 and {f["kind"] for f in found[:-1]} >= {"prompt_threshold", "leak", "scheduled_job"}
    assert found == database_findings


@needs_spark
def test_findings_on_sparks_aggregates_equal_the_databases(spark_set: Path, database_findings: list[dict]) -> None:
    assert _findings_json(api.findings(None, aggregates=spark_set)) == database_findings


def test_a_folder_that_is_no_aggregate_set_is_one_line(fleet_lake: Path, run_cli) -> None:
    result = run_cli("findings", "--aggregates", str(fleet_lake))
    assert result.exit_code != 0 and "no aggregate set at" in result.output and "Traceback" not in result.output


def test_the_weekly_report_on_aggregates_equals_the_databases(duckdb_set: Path, fleet_copy: Path, tmp_path) -> None:
    """The same document (findings, charts' data, headline numbers), but for the time it was made."""
    since, until = datetime(2026, 11, 30), datetime(2026, 12, 7)
    documents = []
    for db, agg in ((fleet_copy, None), (None, duckdb_set)):
        out = tmp_path / f"weekly-{len(documents)}.json"
        api.weekly_report(db, since, until, agg).write(tmp_path / "weekly.html", out)
        document = json.loads(out.read_text())
        document.pop("generated_at", None)
        documents.append(document)
    assert documents[0]["findings"] and documents[0] == documents[1]


def _incident_events(db: Path) -> list[int]:
    """One OOM of each kind of source that has a time (request logs, text logs, snapshots), and the OOM with the
    most requests logged in its hours: the incidents whose pages are compared."""
    with duckdb.connect(str(db), read_only=True) as con:
        by_kind = con.execute(
            "SELECT min(o.event_id) FROM oom_events o JOIN sources s USING (source_id) "
            "WHERE o.ts IS NOT NULL GROUP BY s.kind ORDER BY 1"
        ).fetchall()
        busiest = con.execute(
            "SELECT o.event_id FROM oom_events o JOIN requests r ON r.instance = o.instance "
            "AND r.ts BETWEEN o.ts - INTERVAL 3 HOUR AND o.ts + INTERVAL 3 HOUR "
            "GROUP BY o.event_id ORDER BY count(*) DESC, o.event_id LIMIT 1"
        ).fetchall()
    return sorted({row[0] for row in by_kind + busiest})


def test_the_incident_report_on_aggregates_equals_the_databases(duckdb_set: Path, fleet_copy: Path, tmp_path) -> None:
    """The incident page reads the aggregate tier for its timeline (agg_incident_minutes, agg_incident_detail), so
    an aggregate set draws the same page as the database: verdict, timeline, snapshot, similar incidents."""
    events = _incident_events(fleet_copy)
    assert len(events) >= 3
    for event in events:
        documents = []
        for db, agg in ((fleet_copy, None), (None, duckdb_set)):
            out = tmp_path / f"incident-{event}-{len(documents)}.json"
            api.incident_report(db, event_id=event, aggregates=agg).write(tmp_path / "incident.html", out)
            document = json.loads(out.read_text())
            document.pop("generated_at", None)
            documents.append(document)
        assert documents[0] == documents[1], event
    timelines = [json.loads(p.read_text())["timeline"] for p in tmp_path.glob("incident-*-0.json")]
    assert sum(len(t["requests"]["ts"]) for t in timelines if t) > 100  # pages with requests drawn were compared


def test_db_and_aggregates_together_are_a_usage_error(duckdb_set: Path, fleet_copy: Path, run_cli) -> None:
    for command in (
        ["findings"],
        ["report", "weekly", "-o", "w.html"],
        ["report", "incident", "--event", "1", "-o", "i.html"],
    ):
        result = run_cli(*command, "--db", str(fleet_copy), "--aggregates", str(duckdb_set))
        assert result.exit_code == 2 and "--db and --aggregates name two sources" in result.output, command


@needs_spark
def test_spark_writes_to_a_store_without_rename_by_runs(
    fleet_lake: Path, spark, database_findings, monkeypatch
) -> None:
    """Through Spark's Hadoop file systems (file:// here; s3a://, gs://, abfss:// alike) the set is written as
    AGG/run-<id>/ and committed by the manifest that names it, one object: an interrupted run leaves the committed
    set readable and its orphan is deleted by the next run; findings on the set equal the database's."""
    from oomlab.load import aggregate as aggregate_module
    from oomlab.load.engines import SparkEngine

    lake_uri, out = f"file://{fleet_lake}", fleet_lake.parent / "agg-store"
    first = aggregate_lake(lake_uri, f"file://{out}", SparkEngine(session=spark))
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["engine"] == "spark" and manifest["lake"] == lake_uri and manifest["rows"] == first
    assert [p.name for p in out.iterdir() if p.is_dir()] == [manifest["run"]]
    assert _findings_json(api.findings(None, aggregates=out)) == database_findings

    real_write_set = aggregate_module._write_set

    def interrupted(lake, staging, engine):
        real_write_set(lake, staging, engine)
        raise KeyboardInterrupt  # after every table is written, before the manifest

    monkeypatch.setattr(aggregate_module, "_write_set", interrupted)
    with pytest.raises(KeyboardInterrupt):
        aggregate_lake(lake_uri, f"file://{out}/", SparkEngine(session=spark))
    monkeypatch.undo()
    assert json.loads((out / MANIFEST).read_text())["run"] == manifest["run"]
    assert len([p for p in out.iterdir() if p.is_dir()]) == 2  # the committed run and the orphan
    assert _findings_json(api.findings(None, aggregates=out)) == database_findings

    aggregate_lake(lake_uri, f"file://{out}", SparkEngine(session=spark))
    again = json.loads((out / MANIFEST).read_text())
    assert again["run"] != manifest["run"] and [p.name for p in out.iterdir() if p.is_dir()] == [again["run"]]


def test_duckdb_refuses_a_uri_in_one_line(fleet_lake: Path, tmp_path: Path, run_cli) -> None:
    result = run_cli("aggregate", "--lake", f"s3a://bucket/{fleet_lake.name}", "--out", str(tmp_path / "agg"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "the duckdb engine reads and writes local paths only, not s3a://bucket/lake" in result.output


def test_a_manifest_naming_no_run_is_one_line(duckdb_set: Path, tmp_path: Path, run_cli) -> None:
    agg = tmp_path / "agg"
    shutil.copytree(duckdb_set, agg)
    manifest = json.loads((agg / MANIFEST).read_text())
    for run, reason in (("../agg-duckdb", "names no run folder"), (None, None)):
        (agg / MANIFEST).write_text(json.dumps(manifest | {"run": run}) if run else "{not json")
        result = run_cli("findings", "--aggregates", str(agg))
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert (reason or f"{MANIFEST} is unreadable") in result.output


def test_the_spark_job_entry_runs_as_spark_submit_runs_it(tmp_path: Path) -> None:
    """spark-submit runs the entry as a file, outside its package: --path prints that file, and the file run so
    answers --help and refuses a missing --lake in one line (no Spark needed for either)."""
    import subprocess
    import sys

    module = subprocess.run(
        [sys.executable, "-m", "oomlab.load.spark_job", "--path"], capture_output=True, text=True, check=True
    )
    entry = Path(module.stdout.strip())
    assert entry.name == "spark_job.py" and entry.is_file()
    shown = subprocess.run([sys.executable, str(entry), "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert shown.returncode == 0 and "--lake" in shown.stdout and "--out" in shown.stdout
    refused = subprocess.run([sys.executable, str(entry), "--out", "x"], capture_output=True, text=True, cwd=tmp_path)
    assert refused.returncode == 2 and "--lake and --out are required" in refused.stderr
