"""`oomlab query` reads the database and nothing else (issue 14, item 5): no file outside it can be read or
written, no extension installed or loaded, no setting changed; each refusal is one line with the reason and
exit 1, and the database and the files around it are untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import H200

REFUSED = [
    "COPY (SELECT * FROM sources) TO '{tmp}/other.duckdb'",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM glob('/etc/*')",
    "EXPORT DATABASE '{tmp}/export'",
    "ATTACH '{tmp}/other.duckdb' AS other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET threads = 1",
]


@pytest.fixture
def loaded(run_cli, db: Path) -> Path:
    result = run_cli("ingest", H200 / "serve_leak" / "oom_messages.txt.gz", "--db", db, "--quiet")
    assert result.exit_code == 0, result.output
    return db


@pytest.mark.parametrize("statement", REFUSED)
def test_reaching_outside_the_database_is_refused(run_cli, loaded: Path, tmp_path: Path, statement: str) -> None:
    other = tmp_path / "other.duckdb"
    other.write_bytes(b"not touched")
    result = run_cli("query", statement.format(tmp=tmp_path), "--db", loaded)
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: query failed: ")
    assert "reads the database only" in line
    assert other.read_bytes() == b"not touched" and not (tmp_path / "export").exists()


def test_reading_the_database_still_works(run_cli, loaded: Path) -> None:
    result = run_cli("query", "SELECT count(*) AS ooms FROM oom_events", "--db", loaded, "--format", "json")
    assert result.exit_code == 0 and '"ooms": 3' in result.stdout
