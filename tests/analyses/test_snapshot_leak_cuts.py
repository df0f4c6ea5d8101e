"""Leak suspects that survive a wrapped history ring, no trace at all, and several snapshots.

Every snapshot here is a real H200 capture (tests/data/h200, fixtures README) or derived from one in memory:
`cut_trace` keeps the same segments and blocks and only shortens each device's trace to its last 1 %, 10 % or
50 % of events (what a smaller `max_entries` ring would have kept), or drops it (history off).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import duckdb
import pytest

from oomlab.analyses.snapshot.inspect import diff_snapshots, inspect_snapshot
from oomlab.analyses.snapshot.leak_verdict import judge
from oomlab.analyses.snapshot.leaks import leak_judgement, leak_suspects, site_evidence
from oomlab.analyses.snapshot.series import instance_series, order_snapshots, series_growth
from oomlab.load.snapshot import SnapshotLabels, insert_snapshot
from oomlab.load.sql import apply_schema
from oomlab.parse.snapshot.read import snapshot_from_object

from snapshot_cases import cut_db, cut_trace, read_case, snapshot_path

FRACTIONS = [1.0, 0.5, 0.1, 0.01, 0.0]
KV_SITES = {"transformers/cache_utils.py:update:146", "transformers/cache_utils.py:update:147"}
WEIGHTS = "transformers/modeling_utils.py:to:3706"
# The live cache blocks of site 146 allocated before each cut of the trace (README: 47 requests, each keeping
# one block per layer at each of the two sites; the full 60,000-entry ring already wrapped).
BEFORE_TRACE = {
    "snapshot_end": {1.0: 336, 0.5: 336, 0.1: 344, 0.01: 350, 0.0: 352},
    "snapshot_first_oom": {1.0: 280, 0.5: 288, 0.1: 296, 0.01: 307, 0.0: 312},
}


@pytest.mark.parametrize("name", ["snapshot_end", "snapshot_first_oom"])
@pytest.mark.parametrize("fraction", FRACTIONS)
def test_the_kv_cache_stays_the_top_suspect_in_every_cut(name: str, fraction: float) -> None:
    suspects, basis = leak_judgement(cut_db("serve_leak", name, fraction), 1)
    assert set(suspects["site"].head(2)) == KV_SITES
    assert WEIGHTS not in suspects["site"].to_list()
    top = suspects.row(0, named=True)
    assert top["site"] == "transformers/cache_utils.py:update:146"  # it holds a few KiB more than 147
    assert (top["path"], top["round_blocks"], top["basis"]) == ("request", 8, basis.trace)
    assert (top["live_blocks"], top["shapes"]) == ((352, 18) if name == "snapshot_end" else (312, 19))
    assert top["before_trace_blocks"] == BEFORE_TRACE[name][fraction]
    assert 0.45 < top["share_of_allocated"] < 0.47  # README: 4.2 GiB of 4.6 at the two cache sites
    # the ring wrapped in every cut (most cache blocks predate it); without a trace only the blocks speak
    assert basis.trace == ("none" if fraction == 0 else "wrapped")
    assert top["confidence"] == (0.75 if fraction == 0 else 0.9)
    blocks, shapes = (top["live_blocks"], top["shapes"])
    assert top["reason"].startswith("allocated while serving (a module forward or generate) yet still held; ")
    assert f"{blocks} live blocks in {shapes} shapes" in top["reason"] and "whole rounds of 8 blocks" in top["reason"]
    assert ("predate the trace and outlived it" in top["reason"]) == (fraction > 0)


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_the_weights_are_loaded_not_leaked(fraction: float) -> None:
    evidence, basis = site_evidence(cut_db("serve_leak", "snapshot_end", fraction), 1)
    weights = evidence.filter(evidence["site"] == WEIGHTS).row(0, named=True)
    assert (weights["path"], weights["live_blocks"], weights["shapes"]) == ("load", 77, 5)
    assert 0.3 * (1 << 30) < weights["live_bytes"] < 0.34 * (1 << 30)  # README: 0.32 GiB
    assert judge(weights, basis) is None


@pytest.mark.parametrize(
    ("scenario", "name"),
    [
        ("cache_bloat", "snapshot_end"),
        ("serve_mixed", "snapshot_end"),
        ("serve_mixed", "snapshot_first_oom"),  # dumped mid-request: one request's cache, one shape
        ("model_swap", "snapshot_end"),  # after its clean-up
        ("big_trace_cpp", "snapshot_end"),
    ],
)
@pytest.mark.parametrize("fraction", FRACTIONS)
def test_healthy_captures_show_no_suspect_in_any_cut(scenario: str, name: str, fraction: float) -> None:
    assert leak_suspects(cut_db(scenario, name, fraction), 1).is_empty()


def test_the_resident_model_of_cache_bloat_is_one_block_not_a_pile() -> None:
    evidence, basis = site_evidence(cut_db("cache_bloat", "snapshot_end", 0.0), 1)
    (model,) = evidence.to_dicts()
    assert (model["live_blocks"], model["shapes"], model["live_bytes"]) == (1, 1, 2 << 30)
    assert judge(model, basis) is None


def test_a_site_that_turns_its_old_memory_over_is_no_suspect() -> None:
    """The real serve_leak evidence at its 10 % cut, as if the trace had freed as much of the cache site's
    older memory as it still holds (what a cache at capacity does while it keeps adding)."""
    evidence, basis = site_evidence(cut_db("serve_leak", "snapshot_end", 0.1), 1)
    site = evidence.filter(evidence["site"] == "transformers/cache_utils.py:update:146").row(0, named=True)
    assert judge(site, basis) is not None
    turning = {**site, "older_freed_bytes": site["before_trace_bytes"] + site["largest_round_bytes"]}
    assert judge(turning, basis) is None
    half = {**site, "older_freed_bytes": site["largest_round_bytes"] + site["before_trace_bytes"] // 2}
    verdict = judge(half, basis)
    assert verdict is not None and verdict.confidence < 0.5 and "bounded cache" in verdict.reason


def _two_snapshots(scenario: str, fraction: float = 1.0) -> duckdb.DuckDBPyConnection:
    """Both real snapshots of one process in one database, labelled with its instance (end first: the order
    of insertion must not matter), each with its trace cut to `fraction`."""
    con = duckdb.connect(":memory:")
    apply_schema(con)
    labels = SnapshotLabels(instance="gpu-a-0")
    for snapshot_id, name in ((1, "snapshot_end"), (2, "snapshot_first_oom")):
        data = snapshot_from_object(cut_trace(scenario, name, fraction), f"{scenario}/{name}")
        insert_snapshot(con, data, snapshot_id, labels=labels)
    return con


def test_growth_between_the_two_real_serve_leak_snapshots() -> None:
    con = _two_snapshots("serve_leak")
    assert order_snapshots(con, [1, 2]) == [2, 1]  # first_oom's trace ends 1.3 s before end's
    growth = {row["site"]: row for row in series_growth(con, [2, 1]).to_dicts()}
    for site in KV_SITES:  # 5 more requests kept: 40 more blocks (8 layers x 5) at each site
        assert (growth[site]["growth_blocks"], growth[site]["grew"]) == (40, True)
    assert growth["transformers/cache_utils.py:update:146"]["growth_bytes"] == 132796416
    assert growth["transformers/cache_utils.py:update:147"]["growth_bytes"] == 134029312
    assert (growth[WEIGHTS]["growth_bytes"], growth[WEIGHTS]["grew"]) == (0, False)
    # the request in flight at the first OOM is gone at the end: present once, not growth
    assert growth["transformers/models/llama/modeling_llama.py:forward:67"]["grew"] is False
    suspects = leak_suspects(con, 1, series=[2, 1])
    assert set(suspects["site"]) == KV_SITES
    top = suspects.row(0, named=True)
    assert top["confidence"] == 0.95 and top["series_growth_bytes"] == 132796416
    assert "grew 126.64 MiB across 2 snapshots" in top["reason"]


def test_growth_between_snapshots_without_traces_still_names_the_cache() -> None:
    con = _two_snapshots("serve_leak", fraction=0.0)
    assert order_snapshots(con, [1, 2]) == [1, 2]  # no trace times: the order given
    suspects = leak_suspects(con, 1, series=[2, 1])
    assert set(suspects["site"]) == KV_SITES and suspects["confidence"].to_list() == [0.95, 0.95]
    assert leak_suspects(con, 1)["confidence"].to_list() == [0.75, 0.75]


def test_serve_mixed_does_not_grow_between_its_snapshots() -> None:
    con = _two_snapshots("serve_mixed")
    growth = series_growth(con, [2, 1])
    assert not growth["grew"].any()
    kv = growth.filter(growth["site"] == "transformers/cache_utils.py:update:146").row(0, named=True)
    assert (kv["first_bytes"], kv["last_bytes"]) == (757432320, 0)  # the OOMing request's cache, freed
    assert leak_suspects(con, 1, series=[2, 1]).is_empty()


def test_a_series_in_the_database_is_one_instance_and_device_up_to_the_snapshot() -> None:
    con = _two_snapshots("serve_leak")
    insert_snapshot(con, read_case("cache_bloat"), 3, labels=SnapshotLabels(instance="other-host"))
    assert instance_series(con, 1) == [2, 1]
    assert instance_series(con, 2) == [2]  # the end snapshot is after the first OOM
    assert instance_series(con, 3) == [3]


def test_inspect_several_files_judges_the_newest_with_the_growth() -> None:
    end, first = snapshot_path("serve_leak"), snapshot_path("serve_leak", "snapshot_first_oom")
    result = inspect_snapshot([end, first], top=3)
    assert result["path"] == str(end) and result["leak_basis"] == {
        "trace": "wrapped",
        "snapshots": 2,
        "no_stack_bytes": 0,
    }
    assert [s["path"] for s in result["series"]["snapshots"]] == [str(first), str(end)]
    assert {s["site"] for s in result["series"]["sites"][:2]} == KV_SITES
    assert result["series"]["sites"][0]["bytes"] == [2139729920, 2273759232]
    assert result["leak_suspects"][0]["confidence"] == 0.95
    assert inspect_snapshot([first, end], top=3)["leak_suspects"] == result["leak_suspects"]
    alone = inspect_snapshot(end)
    assert alone["series"] is None and alone["leak_basis"] == {"trace": "wrapped", "snapshots": 1, "no_stack_bytes": 0}


def test_snapshots_without_trace_times_keep_the_order_given(tmp_path: Path) -> None:
    """Both serve_leak snapshots with their traces dropped (history off), re-pickled into tmp_path."""
    paths = []
    for name in ("snapshot_first_oom", "snapshot_end"):
        path = tmp_path / f"{name}.pickle"
        path.write_bytes(pickle.dumps(cut_trace("serve_leak", name, 0.0), protocol=4))
        paths.append(path)
    result = inspect_snapshot(paths)
    assert result["path"] == str(paths[1]) and result["leak_basis"] == {
        "trace": "none",
        "snapshots": 2,
        "no_stack_bytes": 0,
    }
    assert result["leak_suspects"][0]["confidence"] == 0.95  # grew between them, by the file order
    # given the other way round, the cache shrank from one to the next: released memory is no leak
    assert inspect_snapshot(paths[::-1])["leak_suspects"] == []
    assert inspect_snapshot(paths[1])["leak_suspects"][0]["confidence"] == 0.75  # alone: the pile speaks


def test_diff_names_the_suspect_by_its_growth() -> None:
    diff = diff_snapshots(snapshot_path("serve_leak", "snapshot_first_oom"), snapshot_path("serve_leak"))
    assert {s["site"] for s in diff["leak_suspects"]} == KV_SITES
    assert diff["leak_suspects"][0]["series_growth_bytes"] == 132796416


def test_memory_without_call_stacks_is_reported_not_judged(tmp_path: Path) -> None:
    """The real serve_leak end snapshot as a process with history off records it: no trace, blocks without
    frames. No site can be told from the weights, so nothing is a suspect, and the JSON says how much is unplaced."""
    raw = cut_trace("serve_leak", "snapshot_end", 0.0)
    for segment in raw["segments"]:
        for block in segment["blocks"]:
            block["frames"] = []
    path = tmp_path / "no_stacks.pickle"
    path.write_bytes(pickle.dumps(raw, protocol=4))
    result = inspect_snapshot(path)
    assert result["leak_suspects"] == []
    assert result["leak_basis"] == {"trace": "none", "snapshots": 1, "no_stack_bytes": 4930370560}


def test_a_pile_that_did_not_grow_between_snapshots_is_less_sure() -> None:
    """The real serve_leak end snapshot twice, as two dumps with no request in between would hold it."""
    con = duckdb.connect(":memory:")
    apply_schema(con)
    for snapshot_id in (1, 2):
        insert_snapshot(con, read_case("serve_leak"), snapshot_id, labels=SnapshotLabels(instance="gpu-a-0"))
    top = leak_suspects(con, 2, series=[1, 2]).row(0, named=True)
    assert (top["site"], top["series_growth_bytes"], top["confidence"]) == (
        "transformers/cache_utils.py:update:146",
        0,
        0.45,
    )
    assert top["reason"].endswith("; but it did not grow across the 2 snapshots")
