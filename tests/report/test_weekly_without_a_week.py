"""A database whose OOMs no week holds (no request and no logged OOM with a time) gets no weekly report, and the
error says what it does hold and what explains it: real corpus artifacts, a snapshot (snapshots/001, its OOM in
the trace) and a pasted message without a time (oom/064)."""

from __future__ import annotations

from pathlib import Path

import pytest

REALWORLD = Path(__file__).resolve().parents[1] / "cases" / "realworld"


@pytest.mark.parametrize(
    "case, held",
    [("snapshots/001_", "1 OOM recorded only in snapshots"), ("oom/064_", "1 OOM without a time")],
)
def test_no_week_says_what_the_database_holds(tmp_path: Path, run_cli, case: str, held: str) -> None:
    (artifact,) = next(REALWORLD.glob(case + "*")).glob("artifact.*")
    db = tmp_path / "one.duckdb"
    assert run_cli("ingest", artifact, "--db", db, "--quiet").exit_code == 0
    result = run_cli("report", "weekly", "--db", db, "-o", tmp_path / "w.html")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr == (
        "Error: the database holds no requests or logged OOMs with a time to report on "
        f"({held}: `oomlab findings` and `oomlab report incident` explain them)\n"
    )
