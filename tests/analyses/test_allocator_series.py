"""Leak or cache growth from the H200 captures' memory_summary() / memory_stats() printouts alone."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from oomlab import api
from oomlab.analyses.fleet.allocator_series import allocator_series
from oomlab.config import IngestOptions

from conftest import H200


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    db = tmp_path_factory.mktemp("allocator") / "a.duckdb"
    files = [str(p) for run in ("cache_bloat", "serve_leak") for p in sorted((H200 / run).glob("memory_s*"))]
    api.ingest(db, files, IngestOptions())
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {row["instance"]: row for row in allocator_series(con).to_dicts()}
    finally:
        con.close()


def test_files_named_for_the_printout_take_their_folder_as_instance(series) -> None:
    assert set(series) == {"cache_bloat", "serve_leak"}


def test_cache_bloat_is_cache_growth(series) -> None:
    row = series["cache_bloat"]
    # the README: allocated exactly 2.00 GiB after every request, reserved 2.21 -> 4.80 GiB
    assert row["verdict"] == "cache_growth"
    assert row["first_allocated_bytes"] == row["last_allocated_bytes"] == 2 << 30
    assert (row["first_reserved_bytes"], row["last_reserved_bytes"]) == (2258 << 20, 4920 << 20)
    assert row["moments"] == 3  # req0, req50, end (= req399): each as summary and as stats


def test_serve_leak_is_a_leak(series) -> None:
    row = series["serve_leak"]
    # the README: allocated_after climbs from 0.42 GiB to 4.6 GiB; start 330 MiB, end 4.59 GiB allocated
    assert row["verdict"] == "leak" and row["process"] == 1
    assert row["allocated_growth_bytes"] > 4 << 30
    assert "a leak" in row["reason"]


def test_at_dates_a_printout_and_a_bad_at_is_a_usage_error(run_cli, sql, db) -> None:
    stats = H200 / "serve_leak" / "memory_stats_end.json.gz"
    result = run_cli("ingest", stats, "--db", db, "--at", "2026-11-30T09:00", "--tz", "Europe/Berlin", "--quiet")
    assert result.exit_code == 0, result.output
    rows = sql("SELECT pool, ts, allocated_bytes, num_ooms FROM allocator_stats ORDER BY pool")
    assert [(r[0], r[1].isoformat(), r[2], r[3]) for r in rows] == [
        ("all", "2026-11-30T08:00:00", 4_930_370_560, 3),
        ("large", "2026-11-30T08:00:00", 4_930_334_720, None),
        ("small", "2026-11-30T08:00:00", 35_840, None),
    ]
    assert sql("SELECT kind FROM sources") == [("memory_stats",)]
    bad = run_cli("ingest", stats, "--db", db, "--at", "yesterday")
    assert bad.exit_code == 2 and "not an ISO 8601 time" in bad.output


CUT_ROWS = "027_pytorch_comfyui-pr-glued-vs-newline-header-two-moments"
FAIRSEQ = "024_pytorch_fairseq-logger-prefix-glued-to-top-rule-r-drop"


def test_printouts_without_sizes_are_no_series_and_break_no_report(tmp_path) -> None:
    """Real corpus case allocator/027 (a ComfyUI PR comment): two memory_summary() moments whose rows the poster cut,
    so neither states a size; beside allocator/024, whose OOM the incident page explains, each under its case's
    name. The two sizeless moments make no series (there is nothing to compare), and the page renders."""
    realworld = Path(__file__).resolve().parents[1] / "cases" / "realworld" / "allocator"
    for name in (CUT_ROWS, FAIRSEQ):
        shutil.copy(realworld / name / "artifact.txt", tmp_path / f"{name}.txt")
    db = tmp_path / "a.duckdb"
    api.ingest(db, [str(tmp_path / f"{name}.txt") for name in (CUT_ROWS, FAIRSEQ)], IngestOptions())
    con = duckdb.connect(str(db), read_only=True)
    try:
        sizes = con.execute("SELECT allocated_bytes FROM fct_allocator_moments WHERE instance = ?", [CUT_ROWS])
        assert [size for (size,) in sizes.fetchall()] == [None, None]
        assert allocator_series(con).is_empty()
    finally:
        con.close()
    report = api.incident_report(db)
    assert report.doc["event"]["instance"] == FAIRSEQ
