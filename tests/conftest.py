"""Shared test helpers: the real H200 captures, a fresh database, and the CLI."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from oomlab.cli.main import cli

TESTS = Path(__file__).parent
ROOT = TESTS.parent  # the repository: docs/, sql/, reports/, sample_logs/
DATA = TESTS / "data"
H200 = DATA / "h200"
CASES = Path(__file__).parent / "cases"


def read_jsonl_gz(path: Path) -> list[dict]:
    """The records of a gzip'd JSON Lines fixture."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.fixture(scope="session", autouse=True)
def schema_template_cache(tmp_path_factory: pytest.TempPathFactory):
    """New databases start as copies of an empty-schema template (load/connection.py); the tests keep theirs in
    a folder of the session, not in the user's cache. Subprocesses inherit it through the environment."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OOMLAB_CACHE_DIR", str(tmp_path_factory.mktemp("oomlab-cache")))
        yield


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Path of a database file that does not exist yet."""
    return tmp_path / "test.duckdb"


@pytest.fixture
def run_cli() -> Callable[..., Result]:
    """Invoke `oomlab ARGS...`; stdout and stderr kept apart."""

    def run(*args: object) -> Result:
        return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return run


@pytest.fixture(scope="module")
def run_cli_module() -> Callable[..., Result]:
    """`run_cli` for module-scoped fixtures (a page rendered once for a module's tests)."""

    def run(*args: object) -> Result:
        return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return run


@pytest.fixture
def sql(db: Path) -> Callable[..., list[tuple]]:
    """Query the test database read-only."""

    def run(query: str, params: list | None = None) -> list[tuple]:
        con = duckdb.connect(str(db), read_only=True)
        try:
            return con.execute(query, params or []).fetchall()
        finally:
            con.close()

    return run


FLEET = Path(__file__).parent.parent / "sample_logs" / "fleet"


@pytest.fixture(scope="session")
def fleet_db(tmp_path_factory) -> Path:
    """The bundled sample fleet plus the real H200 request logs, ingested once for the whole session."""
    path = tmp_path_factory.mktemp("fleet") / "fleet.duckdb"
    inputs = [FLEET, *sorted(H200.glob("*/requests.jsonl.gz"))]
    result = CliRunner().invoke(cli, ["ingest", *map(str, inputs), "--db", str(path), "--quiet"])
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture(scope="session")
def h200_db(tmp_path_factory) -> Path:
    """The real H200 captures alone (every file of tests/data/h200), ingested once for the whole session."""
    path = tmp_path_factory.mktemp("h200") / "h200.duckdb"
    result = CliRunner().invoke(cli, ["ingest", str(H200), "--db", str(path), "--quiet"])
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture(scope="module")
def fleet_con(fleet_db: Path):
    """A read-only connection to the ingested sample fleet, shared by a module's tests."""
    con = duckdb.connect(str(fleet_db), read_only=True)
    con.execute("SET TimeZone = 'UTC'")
    yield con
    con.close()


@pytest.fixture(scope="session")
def demo_result(tmp_path_factory):
    """`oomlab demo` run once per session: the bundled fleet and H200 captures, their weekly and incident pages."""
    from oomlab import api

    return api.demo(tmp_path_factory.mktemp("demo"))


# Bad copies of real logs for the data-quality tests: each planted line and the reason ingest must give it.
A10_TOTAL = 23_581_097_984  # the sample fleet's A10 as PyTorch reports it (21.96 GiB)
IMPOSSIBLE_REJECTS: dict[str, dict[int, str]] = {
    "a10-01.jsonl": {
        **dict.fromkeys(
            range(11, 16),
            "allocated_after 23.96 GiB above device_total 21.96 GiB; "
            "reserved_after 23.96 GiB above device_total 21.96 GiB",
        ),
        **dict.fromkeys(range(21, 24), "reserved_after 4.00 GiB below allocated_after 4.50 GiB"),
    },
    "serve_mixed.jsonl": {7: "allocated_before -1.00 KiB is negative"},
    "nvsmi_gpu_run2.csv": dict.fromkeys((3, 4), "memory.used 146.48 GiB above memory.total 140.40 GiB"),
}


def write_impossible_copies(folder: Path) -> Path:
    """Copies of real logs in `folder` with the lines of IMPOSSIBLE_REJECTS made impossible, every other line as
    captured: the sample fleet's a10-01 request log with allocated_after and reserved_after 2 GiB above its card
    on lines 11-15 and reserved_after (4.00 GiB) below allocated_after (4.50 GiB) on lines 21-23; the real H200
    serve_mixed log with allocated_before -1024 on line 7; the real H200 nvidia-smi run 2 samples with
    memory.used 150000 MiB, above the card's 143771 MiB, on lines 3 and 4."""
    folder.mkdir(parents=True, exist_ok=True)
    fleet = read_jsonl_gz(FLEET / "requests" / "a10-01.jsonl.gz")
    for row in fleet[10:15]:
        row["allocated_after"] = row["reserved_after"] = A10_TOTAL + (2 << 30)
    for row in fleet[20:23]:
        row["allocated_after"], row["reserved_after"] = 4_831_838_208, 4 << 30
    mixed = read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")
    mixed[6]["allocated_before"] = -1024
    for name, rows in (("a10-01.jsonl", fleet), ("serve_mixed.jsonl", mixed)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with gzip.open(H200 / "env" / "nvsmi_gpu_run2.csv.gz", "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines(keepends=True)
    for number in (3, 4):
        lines[number - 1] = lines[number - 1].replace(" 0 MiB, 143771 MiB", " 150000 MiB, 143771 MiB", 1)
    (folder / "nvsmi_gpu_run2.csv").write_text("".join(lines), encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def impossible_db(tmp_path_factory) -> Path:
    """write_impossible_copies ingested once for the session (read it, do not write to it)."""
    folder = write_impossible_copies(tmp_path_factory.mktemp("impossible") / "logs")
    path = folder.parent / "impossible.duckdb"
    result = CliRunner().invoke(cli, ["ingest", str(folder), "--db", str(path), "--quiet"])
    assert result.exit_code == 0, result.output
    return path


# Spark (the `spark` extra: pyspark and Java 17+). Without it the Spark tests are skipped, except where
# OOMLAB_REQUIRE_SPARK is set (CI), where a missing Spark fails.
HAVE_SPARK = importlib.util.find_spec("pyspark") is not None and shutil.which("java") is not None
if not HAVE_SPARK and os.environ.get("OOMLAB_REQUIRE_SPARK"):
    raise RuntimeError("OOMLAB_REQUIRE_SPARK is set but pyspark or java is missing: pip install '.[spark]'")
needs_spark = pytest.mark.skipif(not HAVE_SPARK, reason="pyspark and java are needed (the spark extra)")


@pytest.fixture(scope="session")
def spark():
    """One Spark session in local mode with 2 executor threads for the whole run (starting one takes ~15 s),
    stopped at the end; times in UTC as oomlab's are."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("oomlab-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    yield session
    session.stop()


def fail_lake_write_of(monkeypatch: pytest.MonkeyPatch, table: str) -> None:
    """Make the lake's writer stop with KeyboardInterrupt when it reaches `table`: an interrupted write."""
    from oomlab.load import lake

    real_copy = lake._copy_partitioned

    def failing(con, select, folder, time_column, pattern):
        if folder.name == table:
            raise KeyboardInterrupt
        return real_copy(con, select, folder, time_column, pattern)

    monkeypatch.setattr(lake, "_copy_partitioned", failing)
