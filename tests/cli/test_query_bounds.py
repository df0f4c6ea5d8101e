"""`oomlab query` is bounded (issue 36): a result that does not end returns its first rows at once and says more
were left; a query that does not end stops at its timeout, and on Ctrl-C, in one line each."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oomlab import api
from oomlab.errors import DatabaseError

from conftest import H200

ENDLESS = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"


@pytest.fixture
def loaded(run_cli, db: Path) -> Path:
    result = run_cli("ingest", H200 / "serve_leak" / "oom_messages.txt.gz", "--db", db, "--quiet")
    assert result.exit_code == 0, result.output
    return db


def test_a_billion_rows_return_the_first_ten_thousand_and_say_so(loaded: Path, run_cli) -> None:
    result = api.query(loaded, "SELECT * FROM range(1000000000)", limit=10_000)
    assert len(result.rows) == 10_000 and result.truncated and result.rows[-1] == (9999,)
    shown = run_cli("query", "SELECT * FROM range(1000000000)", "--db", loaded, "--limit", "3", "--format", "csv")
    assert shown.exit_code == 0 and shown.stdout == "range\n0\n1\n2\n"
    assert "the first 3 rows; more were left unread (--limit N or --all)" in shown.stderr
    every = run_cli("query", "SELECT * FROM range(12000)", "--db", loaded, "--all", "--format", "csv")
    assert every.stdout.count("\n") == 12_001 and "left unread" not in every.stderr


def test_an_endless_query_stops_at_its_timeout(loaded: Path) -> None:
    started = time.monotonic()
    with pytest.raises(DatabaseError, match=r"query stopped after 1 s"):
        api.query(loaded, ENDLESS, timeout=1.0)
    assert time.monotonic() - started < 30


def test_ctrl_c_stops_an_endless_query_in_one_line(loaded: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "oomlab.cli.main", "query", ENDLESS, "--db", str(loaded)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)  # well into the query
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (1, "Error: query stopped: interrupted (Ctrl-C)\n")
    assert os.path.exists(loaded)


@pytest.mark.parametrize("sql", ["", "  ", ";", "/* nothing */"])
def test_no_statement_is_said_in_one_line_never_a_traceback(loaded: Path, run_cli, sql: str) -> None:
    """An empty argument (a shell variable that was not set) or a statement that returns nothing."""
    result = run_cli("query", sql, "--db", loaded)
    assert "Traceback" not in result.output + result.stderr
    if sql.strip(" ;"):
        assert result.exit_code == 0 and result.stdout.strip() == ""
    else:
        assert result.exit_code != 0 and result.stderr.startswith("Error: no SQL statement given")
