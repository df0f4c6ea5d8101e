"""The command line: exit codes, exact error text, output formats, help on every command."""

from __future__ import annotations

import json

import pytest

import oomlab
from oomlab.cli.main import cli

from conftest import H200


def test_version(run_cli):
    result = run_cli("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"oomlab, version {oomlab.__version__}"


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_has_help(run_cli, command):
    result = run_cli(command, "--help")
    assert result.exit_code == 0
    assert cli.commands[command].help, f"{command} has no help text"
    assert "Usage: " in result.stdout


def test_missing_path_is_a_usage_error(run_cli, db, tmp_path):
    result = run_cli("ingest", tmp_path / "nope.jsonl", "--db", db)
    assert result.exit_code == 2
    assert f"Path '{tmp_path / 'nope.jsonl'}' does not exist." in result.stderr


def test_bad_option_values_are_usage_errors(run_cli, db):
    path = H200 / "serve_mixed" / "requests.jsonl.gz"
    assert run_cli("ingest", path, "--db", db, "--tz", "Mars/Olympus").exit_code == 2
    assert run_cli("ingest", path, "--db", db, "--tag", "novalue").exit_code == 2
    result = run_cli("ingest", path, "--db", db, "--map", "nonsense=foo")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: unknown field 'nonsense' in mapping (map one of: ts, instance,")


def test_ingest_summary_and_query_formats(run_cli, db):
    ingest = run_cli("ingest", H200 / "serve_mixed" / "requests.jsonl.gz", "--db", db)
    assert ingest.exit_code == 0
    assert "1 sources: 1 ingested, 0 skipped, 0 failed; 101 rows, 0 rejects" in ingest.stdout
    query = "SELECT request_id, requested_bytes FROM oom_events ORDER BY line LIMIT 2"
    as_json = run_cli("query", query, "--db", db, "--format", "json")
    assert json.loads(as_json.stdout) == [
        {"request_id": "gpu-b-1-00031", "requested_bytes": 417333248},
        {"request_id": "gpu-b-1-00058", "requested_bytes": 606076928},
    ]
    as_csv = run_cli("query", query, "--db", db, "--format", "csv")
    assert as_csv.stdout.splitlines() == [
        "request_id,requested_bytes",
        "gpu-b-1-00031,417333248",
        "gpu-b-1-00058,606076928",
    ]
    assert "gpu-b-1-00031" in run_cli("query", query, "--db", db).stdout


def test_sources_lists_what_was_ingested(run_cli, db):
    run_cli("ingest", H200 / "serve_leak" / "requests.jsonl.gz", "--db", db)
    rows = json.loads(run_cli("sources", "--db", db, "--format", "json").stdout)
    assert [(r["kind"], r["rows"], r["rejects"]) for r in rows] == [("jsonl", 47, 0)]
    assert rows[0]["path"].endswith("serve_leak/requests.jsonl.gz")


def test_query_errors_are_one_line(run_cli, db):
    run_cli("ingest", H200 / "serve_leak" / "requests.jsonl.gz", "--db", db)
    result = run_cli("query", "SELECT nope FROM requests", "--db", db)
    assert result.exit_code == 1
    assert result.stderr.startswith('Error: query failed: Binder Error: Referenced column "nope" not found')
    assert len(result.stderr.strip().splitlines()) == 1


def test_query_without_database(run_cli, tmp_path):
    result = run_cli("query", "SELECT 1", "--db", tmp_path / "none.duckdb")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: no database at {tmp_path / 'none.duckdb'} (run `oomlab ingest` first or pass --db)"
    )


def test_db_from_environment(run_cli, db, monkeypatch, sql):
    monkeypatch.setenv("OOMLAB_DB", str(db))
    assert run_cli("ingest", H200 / "serve_leak" / "requests.jsonl.gz").exit_code == 0
    assert sql("SELECT count(*) FROM requests") == [(47,)]
