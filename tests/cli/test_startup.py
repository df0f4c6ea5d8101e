"""Start-up stays cheap (issue 15: `oomlab --help` and `oomlab sources` under 0.3 s, bench/startup.py): each
command loads what it uses, nothing more, and opening an up-to-date database runs no schema work."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from oomlab.load import sql
from oomlab.load.tables import connect

from conftest import H200

# Runs `oomlab ARGS` in a fresh interpreter, then prints the top-level packages and oomlab modules it loaded.
_LOADED = """
import contextlib, io, json, sys
from oomlab.cli.main import cli
code = None
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        cli(sys.argv[1:], prog_name="oomlab")
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""
HEAVY = ("duckdb", "polars", "pyarrow", "plotly", "numpy", "pandas", "zstandard", "xxhash")


def _loaded(*args: object) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", _LOADED, *map(str, args)], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(run.stdout.splitlines()[-1])


def _tops(modules: list[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def _oomlab(modules: list[str]) -> set[str]:
    return {m for m in modules if m.startswith("oomlab.")}


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("report", "--help"), ("snapshot", "--help")])
def test_help_and_version_load_click_and_the_command_modules_only(args: tuple[str, ...]) -> None:
    found = _loaded(*args)
    assert found["code"] == 0 and found["out"]
    assert not _tops(found["modules"]) & {*HEAVY, "rich"}
    assert {m.rsplit(".", 1)[0] for m in _oomlab(found["modules"])} <= {"oomlab", "oomlab.cli"}
    assert not _oomlab(found["modules"]) & {"oomlab.api", "oomlab.cli.render"}


def test_sources_loads_duckdb_and_the_connection_only(db: Path, run_cli: Callable[..., Result]) -> None:
    assert run_cli("ingest", H200 / "serve_mixed" / "requests.jsonl.gz", "--db", db, "--quiet").exit_code == 0
    found = _loaded("sources", "--db", db)
    assert found["code"] in (0, None) and "requests.jsonl.gz" in found["out"]
    assert "duckdb" in found["modules"]
    assert not _tops(found["modules"]) & (set(HEAVY) - {"duckdb"})
    layers = {m.split(".")[1] for m in _oomlab(found["modules"])}
    assert layers <= {"cli", "api", "errors", "load", "assets"}, layers
    assert not _oomlab(found["modules"]) & {"oomlab.load.tables", "oomlab.records", "oomlab.config"}
    as_csv = _loaded("sources", "--db", db, "--format", "csv")
    assert "requests.jsonl.gz" in as_csv["out"] and "rich" not in _tops(as_csv["modules"])  # CSV draws nothing


def test_an_up_to_date_database_is_opened_without_schema_work(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    connect(db).close()  # a new database: the schema is created, stamped with the fingerprint

    def refuse(*_: object) -> None:
        raise AssertionError("schema work on an up-to-date database")

    monkeypatch.setattr(sql, "run_file", refuse)
    monkeypatch.setattr(sql, "_rename_columns", refuse)
    for read_only in (False, True):
        connect(db, read_only=read_only).close()
