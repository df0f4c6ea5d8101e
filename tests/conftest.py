"""Shared test helpers: the real H200 captures, a fresh database, and the CLI."""

from __future__ import annotations

import gzip
import json
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
