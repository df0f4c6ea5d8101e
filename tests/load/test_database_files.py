"""The --db file itself misbehaving (issue 36): another engine's file, a corrupt DuckDB file, a damaged schema
template in the cache, and the machine's limits (memory, spill space) met by DuckDB. Each is one line that names
the file or the limit and the fix, never a traceback and never a change to a file that is not oomlab's."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from oomlab.errors import DatabaseError, resource_error
from oomlab.load import connection
from oomlab.load.connection import connect

from conftest import FLEET


def _sqlite_file(path: Path) -> Path:
    """A real SQLite database, written by Python's sqlite3."""
    import sqlite3

    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE jobs (name TEXT)")
        con.execute("INSERT INTO jobs VALUES ('backup')")
    con.close()
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("read_only", [False, True])
def test_another_engines_file_is_refused_before_duckdb_opens_it(tmp_path, read_only):
    path = _sqlite_file(tmp_path / "fleet.db")
    before = _digest(path)
    with pytest.raises(DatabaseError, match=r"fleet\.db is a SQLite database, not a DuckDB database"):
        connect(path, read_only=read_only)
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.db"]  # no .wal, no .tmp beside it


def test_a_corrupt_database_is_one_line_with_its_path_and_the_fix(tmp_path, run_cli):
    path = tmp_path / "fleet.duckdb"
    connect(path).close()
    with open(path, "r+b") as handle:  # the first data blocks overwritten, the file header kept
        handle.seek(8192)
        handle.write(os.urandom(64 << 10))
    result = run_cli("findings", "--db", str(path))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: cannot open database {path}: Corrupt database file")
    assert line.endswith("(restore a copy, or ingest the logs again into a new --db)")


@pytest.mark.parametrize("damage", ["cut short", "zeroed", "another engine's"])
def test_a_damaged_schema_template_is_rebuilt_and_never_blamed_on_the_new_file(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("OOMLAB_CACHE_DIR", str(tmp_path / "cache"))
    connect(tmp_path / "first.duckdb").close()  # builds the template
    template = connection._template_path()
    assert template is not None and template.is_file()
    whole = template.read_bytes()
    if damage == "cut short":
        template.write_bytes(whole[: len(whole) // 3])
    elif damage == "zeroed":
        template.write_bytes(bytes(len(whole)))
    else:
        template.unlink()
        _sqlite_file(template)
    with connect(tmp_path / "second.duckdb") as con:  # created in place; the damaged template is gone
        assert con.execute("SELECT count(*) FROM sources").fetchone() == (0,)
    connect(tmp_path / "third.duckdb").close()  # and the next new database builds it afresh
    assert template.read_bytes()[8:12] == b"DUCK"


def _oomlab(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oomlab.cli.main", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_duckdb_out_of_memory_is_one_line_that_names_the_setting(tmp_path):
    """The sample fleet's request logs ingested under an 8 MB DuckDB cap: DuckDB's own OutOfMemoryException (its
    buffer pool cannot hold one block) is each file's one line naming OOMLAB_MEMORY_LIMIT, not the file's fault."""
    env = {**os.environ, "OOMLAB_MEMORY_LIMIT": "8MB"}
    db = tmp_path / "fleet.duckdb"
    done = _oomlab("ingest", str(FLEET / "requests"), "--db", str(db), "--quiet", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 10
    for line in errors:
        assert ".jsonl.gz: out of memory: could not allocate block of size" in line
        assert "raise OOMLAB_MEMORY_LIMIT" in line
    assert "10 sources: 0 ingested, 0 skipped, 10 failed" in done.stdout


def test_spill_space_running_out_is_told_apart_from_memory(tmp_path):
    """DuckDB's real exception when its spill folder is full too (a sort over 20 MB of memory and 2 MB of spill
    space): the message says spill space and where DuckDB spills."""
    con = duckdb.connect(str(tmp_path / "spill.duckdb"))
    con.execute("SET memory_limit = '20MB'; SET max_temp_directory_size = '2MB'; SET threads = 1")
    with pytest.raises(duckdb.OutOfMemoryException) as raised:
        con.execute("CREATE TABLE t AS SELECT range r, md5(range::VARCHAR) s FROM range(3000000) ORDER BY s")
    con.close()
    said = resource_error(raised.value)
    assert said is not None
    assert said.message.startswith("DuckDB ran out of memory and of spill space: failed to offload data block")
    assert "DuckDB spills beside it, in DB.tmp/" in said.message
    assert resource_error(ValueError("a bug")) is None  # anything else keeps its traceback
