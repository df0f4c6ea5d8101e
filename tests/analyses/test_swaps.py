"""Leaks across model swaps (analyses.fleet.swaps) on the real model_swap capture (tests/data/h200/README.md):
four unclean swaps of two models climb 0.35 -> 1.13 GiB, then four clean ones stay at 0.25-0.35 GiB. The cuts
below are the real lines of swaps.jsonl, taken apart or given a pid; nothing in their numbers is changed."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from oomlab import api
from oomlab.analyses.fleet.swaps import swap_runs
from oomlab.config import IngestOptions

from conftest import H200, read_jsonl_gz

SWAPS = read_jsonl_gz(H200 / "model_swap" / "swaps.jsonl.gz")


def _ingested(tmp_path: Path, lines: list[dict]) -> duckdb.DuckDBPyConnection:
    """A read-only connection to a database holding `lines` as one request log on gpu-s-0."""
    log = tmp_path / "swaps.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    db = tmp_path / "swaps.duckdb"
    api.ingest(db, [str(log)], IngestOptions(instance="gpu-s-0"))
    return duckdb.connect(str(db), read_only=True)


def _runs(tmp_path: Path, lines: list[dict]):
    con = _ingested(tmp_path, lines)
    try:
        return swap_runs(con).to_dicts()
    finally:
        con.close()


def test_the_unclean_swaps_leak_and_the_clean_ones_do_not(tmp_path):
    unclean, clean = _runs(tmp_path, SWAPS)
    # both models came back once each, each time holding about the other model's size more
    assert (unclean["is_leak"], unclean["returns"], unclean["growing_returns"]) == (True, 2, 2)
    assert (unclean["first_level_bytes"], unclean["last_level_bytes"]) == (379636736, 1211756544)
    assert unclean["growth_bytes"] == (971088896 - 379636736) + (1211756544 - 620828672)
    # the memory came back with the first clean unload, at the level a fresh m0 holds
    assert unclean["given_back_at"].isoformat() == "2026-11-30T01:47:05.795000"
    assert unclean["given_back_level_bytes"] == 372820992
    assert (clean["is_leak"], clean["returns"]) == (False, 2)


def test_clean_swaps_alone_are_no_leak(tmp_path):
    assert [run["is_leak"] for run in _runs(tmp_path, SWAPS[4:])] == [False]


@pytest.mark.parametrize("cut", [SWAPS[:3], SWAPS[1:4]])
def test_one_return_is_not_a_pattern(tmp_path, cut):
    """A single return that holds more can be a buffer made on first use."""
    (run,) = _runs(tmp_path, cut)
    assert (run["returns"], run["is_leak"]) == (1, False)


def test_a_restart_between_the_swaps_cuts_the_run(tmp_path):
    """The same unclean lines, with a new pid from the third on: no run has two returns any more."""
    lines = [{**line, "pid": 100 if i < 2 else 200} for i, line in enumerate(SWAPS[:4])]
    assert [run["returns"] for run in _runs(tmp_path, lines)] == [0, 0]


def test_an_oom_line_states_the_level_it_met_not_the_level_after(tmp_path):
    """`allocated` on a successful line is the level after it; on an OOM line it is what the OOM met."""
    con = _ingested(tmp_path, [{**SWAPS[0], "status": "oom"}, SWAPS[1]])
    try:
        rows = con.execute("SELECT is_oom, allocated_after, reserved_after FROM stg_requests ORDER BY ts").fetchall()
    finally:
        con.close()
    assert rows == [(True, None, None), (False, 620828672, 977272832)]
