"""`oomlab ingest` starts rg on a plain text log before DuckDB loads: the scan takes that search up, and a
search no scan takes up is ended."""

from __future__ import annotations

import gzip
from pathlib import Path

import duckdb
import pytest

from oomlab import api
from oomlab.config import IngestOptions
from oomlab.ingest import ahead
from oomlab.parse.text import ripgrep, textscan

from conftest import H200


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[ripgrep.RipgrepSearch]:
    """Every rg search started, in order."""
    searches: list[ripgrep.RipgrepSearch] = []

    class Recorded(ripgrep.RipgrepSearch):
        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            searches.append(self)

    monkeypatch.setattr(textscan, "RipgrepSearch", Recorded)
    return searches


def serve_log(folder: Path) -> Path:
    """The real H200 serve_mixed OOM messages as a plain log."""
    path = folder / "serve.log"
    path.write_bytes(gzip.decompress((H200 / "serve_mixed" / "oom_messages.txt.gz").read_bytes()))
    return path


def events(db: Path) -> list[tuple[object, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT line, ts, requested_bytes, free_bytes FROM oom_events ORDER BY line").fetchall()


def test_the_scan_takes_up_the_search_started_ahead(
    tmp_path: Path, started: list[ripgrep.RipgrepSearch], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = serve_log(tmp_path)
    report = api.ingest(tmp_path / "ahead.duckdb", [str(log)], IngestOptions())
    assert [r.rows for r in report.results] == [len(events(tmp_path / "ahead.duckdb"))] and report.results[0].rows > 0
    assert len(started) == 1  # one rg for the file: the one started ahead
    monkeypatch.setattr(ahead, "_search", lambda path: None)
    api.ingest(tmp_path / "later.duckdb", [str(log)], IngestOptions())
    assert len(started) == 2  # started by the scan itself
    assert events(tmp_path / "ahead.duckdb") == events(tmp_path / "later.duckdb")


def test_a_search_no_scan_takes_up_is_ended(tmp_path: Path, started: list[ripgrep.RipgrepSearch]) -> None:
    log = serve_log(tmp_path)
    db = tmp_path / "oomlab.duckdb"
    api.ingest(db, [str(log)], IngestOptions())
    report = api.ingest(db, [str(log)], IngestOptions())  # unchanged: skipped before any scan
    assert [r.status for r in report.results] == ["skipped"]
    assert len(started) == 2
    assert started[1].child.returncode is not None  # ended and reaped, not left running


def test_the_first_file_is_detected_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its kind is told in the thread that starts its search, and the loop takes that answer (issue 38)."""
    from oomlab.parse import detect

    calls: list[str] = []
    real = detect.detect_kind
    monkeypatch.setattr(detect, "detect_kind", lambda path, *rest: calls.append(str(path)) or real(path, *rest))
    log = serve_log(tmp_path)
    report = api.ingest(tmp_path / "once.duckdb", [str(log)], IngestOptions())
    assert report.results[0].rows > 0 and calls == [str(log)]


def test_nothing_is_searched_ahead_for_other_kinds(tmp_path: Path, started: list[ripgrep.RipgrepSearch]) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(gzip.decompress((H200 / "serve_mixed" / "requests.jsonl.gz").read_bytes()))
    api.ingest(tmp_path / "oomlab.duckdb", [str(requests)], IngestOptions())
    assert started == []
