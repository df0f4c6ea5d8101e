"""Upgrades as a tested path (issue 36): databases earlier releases wrote (tests/data/old_databases, from the real
H200 serve_leak capture) open with this version, every command works on them and new files ingest into them; a
database a newer oomlab wrote is refused in one line, untouched; a foundation table renamed by hand is an error,
never recreated empty."""

from __future__ import annotations

import gzip
import json

import duckdb
import pytest

from oomlab.load.sql import SCHEMA_VERSION

from conftest import DATA, H200

OLD = DATA / "old_databases"


def _counts(db, *queries: str) -> list[tuple]:
    """The first row of each query, on a read-only connection."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [con.execute(q).fetchone() for q in queries]
    finally:
        con.close()


def _old(tmp_path, commit: str):
    db = tmp_path / f"{commit}.duckdb"
    db.write_bytes(gzip.decompress((OLD / f"{commit}.duckdb.gz").read_bytes()))
    return db


def _altered(tmp_path, statement: str):
    """7cce5a5's database with `statement` run on it by hand (outside oomlab)."""
    db = _old(tmp_path, "7cce5a5")
    con = duckdb.connect(str(db))
    con.execute(statement)
    con.close()
    return db


@pytest.mark.parametrize("commit", ["bcc0507", "7cce5a5"])
def test_an_earlier_releases_database_reads_and_takes_new_files(tmp_path, run_cli, commit):
    db = _old(tmp_path, commit)
    sources = run_cli("sources", "--db", db, "--format", "json")
    assert sources.exit_code == 0, sources.output
    assert sorted((s["rows"], s["kind"]) for s in json.loads(sources.stdout)) == [(3, "text"), (47, "jsonl")]
    findings = run_cli("findings", "--db", db, "--json", tmp_path / "f.json")
    assert findings.exit_code == 0, findings.output
    top = json.loads((tmp_path / "f.json").read_text())["findings"][0]
    assert (top["kind"], top["subject"], top["impact"]) == ("leak", "model_version llama-mini-v2", 3.0)
    more = run_cli("ingest", H200 / "serve_mixed" / "requests.jsonl.gz", "--db", db, "--quiet")
    assert more.exit_code == 0, more.output
    counts = _counts(db, "SELECT count(*) FROM stg_requests", "SELECT count(*) FROM stg_oom_events")
    assert counts == [(148,), (7,)]


def test_a_newer_database_is_refused_untouched(tmp_path, run_cli):
    db = tmp_path / "newer.duckdb"
    assert run_cli("ingest", H200 / "serve_leak" / "requests.jsonl.gz", "--db", db, "--quiet").exit_code == 0
    con = duckdb.connect(str(db))
    con.execute(f"COMMENT ON TABLE sources IS 'oomlab schema v{SCHEMA_VERSION + 1} 0123456789abcdef'")
    con.close()
    before = db.read_bytes()
    for args in (("sources",), ("findings",), ("ingest", H200 / "serve_mixed" / "requests.jsonl.gz")):
        result = run_cli(*args, "--db", db)
        assert result.exit_code == 1
        (line,) = [x for x in result.stderr.splitlines() if x.strip()]
        assert f"written by a newer oomlab (schema v{SCHEMA_VERSION + 1})" in line
    assert db.read_bytes() == before


def test_a_renamed_foundation_table_is_an_error_not_an_empty_table(tmp_path, run_cli):
    db = _altered(tmp_path, "ALTER TABLE requests RENAME TO requests_backup")
    result = run_cli("sources", "--db", db)
    assert result.exit_code == 1 and "has no table requests: renamed or dropped outside oomlab" in result.stderr
    kept = "SELECT count(*) FROM requests_backup"
    assert _counts(db, kept, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'requests'") == [(47,), (0,)]


def test_a_changed_column_type_names_the_column(tmp_path, run_cli):
    db = _altered(tmp_path, "ALTER TABLE rejects ALTER COLUMN line TYPE VARCHAR")
    result = run_cli("sources", "--db", db)
    assert result.exit_code == 1 and "rejects.line is VARCHAR in the database" in result.stderr
