"""Snapshot analyses against what is known to be true of the real H200 captures (fixtures README)."""

from __future__ import annotations

import gzip
import json
from datetime import datetime

import polars as pl
import pytest

from oomlab.analyses.snapshot.leak_trace import site_activity
from oomlab.analyses.snapshot.leaks import leak_suspects, site_growth
from oomlab.analyses.snapshot.ooms import oom_moments
from oomlab.analyses.snapshot.sites import allocation_sites, site_stacks
from oomlab.analyses.snapshot.state import pool_states, snapshot_state, would_fit
from oomlab.analyses.snapshot.timeline import downsample, replay, timeline

from snapshot_cases import DATA, GIB, case_db

H200_TOTAL_BYTES = 150109880320  # meta.json total_memory of every scenario


def test_serve_leak_top_suspect_is_the_kv_cache_concatenation() -> None:
    suspects = leak_suspects(case_db("serve_leak"), 1)
    top = suspects.row(0, named=True)
    assert top["site"] in ("transformers/cache_utils.py:update:146", "transformers/cache_utils.py:update:147")
    assert set(suspects["site"].head(2)) == {
        "transformers/cache_utils.py:update:146",
        "transformers/cache_utils.py:update:147",
    }
    assert top["growth_bytes"] > 0 and top["rising_windows"] >= 0.5 * top["window_steps"]
    assert not suspects["site"].str.contains("modeling_utils.py:to").any()


def test_serve_leak_live_bytes_by_site() -> None:
    sites = allocation_sites(case_db("serve_leak"), 1)
    by_site = dict(zip(sites["site"], sites["live_bytes"], strict=True))
    cache = by_site["transformers/cache_utils.py:update:146"] + by_site["transformers/cache_utils.py:update:147"]
    assert 4.1 * GIB < cache < 4.3 * GIB  # README: 4.2 GiB at cache_utils.py update
    assert 0.3 * GIB < by_site["transformers/modeling_utils.py:to:3706"] < 0.34 * GIB  # README: 0.32 GiB
    assert sites["rank"].to_list()[:2] == [1, 2]


def test_site_stacks_show_the_caller() -> None:
    stacks = site_stacks(case_db("serve_leak"), 1, "transformers/cache_utils.py:update:146")
    assert "generate" in stacks["name"].to_list()
    assert stacks.filter(pl.col("depth") == 0)["name"].to_list()[0] == "update"


@pytest.mark.parametrize("scenario", ["cache_bloat", "serve_mixed", "model_swap", "big_trace_cpp"])
def test_no_leak_suspect_in_healthy_runs(scenario: str) -> None:
    assert leak_suspects(case_db(scenario), 1).is_empty()


def test_cache_bloat_resident_model_is_not_a_suspect() -> None:
    growth = site_growth(case_db("cache_bloat"), 1)
    model = growth.filter(pl.col("live_bytes") == 2 * GIB).row(0, named=True)
    assert model["growth_bytes"] == 2 * GIB and model["rising_windows"] == 1


@pytest.mark.parametrize(("scenario", "unallocated_gib"), [("fragmentation", 1.67), ("fragmentation_expandable", 1.72)])
@pytest.mark.parametrize("name", ["snapshot_fragmented_oom", "snapshot_after_empty_cache"])
def test_the_1gib_request_is_a_fragmentation_oom(scenario: str, unallocated_gib: float, name: str) -> None:
    moments = oom_moments(case_db(scenario, name), 1)
    assert len(moments) == (1 if name == "snapshot_fragmented_oom" else 2)
    for moment in moments:
        assert moment.requested_bytes == GIB
        assert moment.cause == "fragmentation"
        assert moment.reserved_unallocated_bytes == pytest.approx(unallocated_gib * GIB, rel=0.005)
        assert moment.largest_free_block_bytes < GIB
        assert moment.device_free_bytes > 100 * GIB  # the 4 GiB cap, not the device, was the limit


@pytest.mark.parametrize("scenario", ["fragmentation", "fragmentation_expandable"])
def test_fragmentation_state_and_fit(scenario: str) -> None:
    con = case_db(scenario, "snapshot_fragmented_oom")
    state = snapshot_state(con, 1)
    assert state.expandable_segments == (scenario == "fragmentation_expandable")
    assert state.largest_free_block_bytes < 20 * (1 << 20)
    assert state.fragmentation > 0.95
    assert state.reserved_unallocated_bytes == state.reserved_bytes - state.allocated_bytes
    verdict = would_fit(con, 1, GIB)
    assert (verdict.fits, verdict.cause, verdict.pool) == (False, "fragmentation", "large")
    assert would_fit(con, 1, 4 << 20).fits


def test_pool_states() -> None:
    pools = pool_states(case_db("serve_leak"), 1)
    assert pools["pool"].to_list() == ["large", "small"]
    assert pools["segments"].to_list() == [194, 2]
    assert int(pools["reserved_bytes"].sum()) == snapshot_state(case_db("serve_leak"), 1).reserved_bytes


def test_serve_leak_ooms_hit_the_per_process_cap() -> None:
    moments = oom_moments(case_db("serve_leak"), 1)
    assert [m.cause for m in moments] == ["per_process_cap", "per_process_cap"]
    assert all(4.6 * GIB < m.allocated_bytes < 4.8 * GIB for m in moments)


def test_serve_mixed_oom_is_external_pressure_when_the_device_total_is_known() -> None:
    con = case_db("serve_mixed", "snapshot_first_oom")
    (moment,) = oom_moments(con, 1, device_total_bytes=H200_TOTAL_BYTES)
    assert moment.cause == "external_pressure"
    assert moment.device_free_bytes < moment.requested_bytes
    (unknown,) = oom_moments(con, 1)
    assert unknown.cause == "capacity"


def _swaps() -> list[dict[str, object]]:
    with gzip.open(DATA / "model_swap" / "swaps.jsonl.gz", "rt") as handle:
        return [json.loads(line) for line in handle]


def _time_us(ts: str) -> int:
    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1_000_000)


def test_model_swap_replay_shows_the_stale_weights_then_the_cleanup() -> None:
    con = case_db("model_swap")
    full = con.sql(
        "SELECT time_us, allocated_bytes, reserved_bytes FROM fct_snapshot_timeline WHERE snapshot_id = 1 ORDER BY seq"
    ).pl()
    swaps = _swaps()
    for swap in swaps:  # the backward replay meets the reserved bytes the service logged at every swap
        at = full.filter(pl.col("time_us") <= _time_us(str(swap["ts"]))).tail(1)
        assert at["reserved_bytes"].item() == swap["reserved"]
    unclean_end = _time_us(str(swaps[3]["ts"]))
    climbed = full.filter(pl.col("time_us") <= unclean_end)["allocated_bytes"].tail(1).item()
    assert climbed == pytest.approx(1.13 * GIB, rel=0.05)  # README: 0.35 -> 1.13 GiB over four swaps
    replay = timeline(con, 1)
    assert replay is not None and replay.start_allocated_bytes == 0
    assert 1.1 * GIB < replay.peak_allocated_bytes < 1.45 * GIB
    assert replay.peak_allocated_time_us <= unclean_end
    assert replay.final_allocated_bytes == 32 << 20  # after the clean-up


def test_timeline_ends_at_the_final_state_and_marks_ooms() -> None:
    con = case_db("serve_leak")
    replay = timeline(con, 1, max_points=300)
    state = snapshot_state(con, 1)
    assert replay is not None
    assert (replay.final_allocated_bytes, replay.final_reserved_bytes) == (
        state.allocated_bytes,
        state.reserved_bytes,
    )
    assert replay.event_count == 60000 and replay.points.height <= 320
    assert replay.points["is_oom"].sum() == 2 and len(replay.oom_times_us) == 2
    assert replay.points["allocated_bytes"].max() == replay.peak_allocated_bytes


@pytest.mark.parametrize(("scenario", "batch_rows"), [("serve_leak", 7001), ("model_swap", 999), ("serve_mixed", 97)])
def test_timeline_in_batches_equals_the_whole_replay(scenario: str, batch_rows: int) -> None:
    """Replayed batch by batch (memory bounded by a batch), the timeline is the whole trace's: the same
    points, peaks, start, end and OOMs as downsampling the replay of every event at once."""
    con = case_db(scenario)
    full, start = replay(con, 1, 0)
    batched = timeline(con, 1, max_points=300, batch_rows=batch_rows)
    assert batched is not None and batched.event_count == full.height > 300
    assert batched.points.equals(downsample(full, 300))
    for column in ("allocated_bytes", "reserved_bytes"):
        label = column.removesuffix("_bytes")
        assert getattr(batched, f"start_{column}") == start[column]
        assert getattr(batched, f"final_{column}") == full[column][-1]
        first_peak = full.row(int(full[column].arg_max() or 0), named=True)
        assert getattr(batched, f"peak_{column}") == max(first_peak[column], start[column])
        if first_peak[column] >= start[column]:
            assert getattr(batched, f"peak_{label}_time_us") == first_peak["time_us"]
    assert list(batched.oom_times_us) == full.filter(pl.col("is_oom"))["time_us"].to_list()


@pytest.mark.parametrize(("scenario", "batch_rows"), [("serve_leak", 3001), ("model_swap", 333)])
def test_site_activity_in_batches_equals_one_batch(scenario: str, batch_rows: int) -> None:
    """The leak judgement's trace evidence, carried batch to batch, is what one pass over the whole trace gives."""
    con = case_db(scenario)
    whole, batched = site_activity(con, 1, 10), site_activity(con, 1, 10, batch_rows=batch_rows)
    assert batched.event_count == whole.event_count > 10 * batch_rows
    assert batched.frees_older == whole.frees_older
    assert batched.growth.sort("site").equals(whole.growth.sort("site"))
    assert batched.activity.sort("site").equals(whole.activity.sort("site"))
    assert whole.growth["growth_bytes"].abs().sum() > 0 and whole.activity["trace_allocs"].sum() > 0


def test_downsample_keeps_peaks_dips_and_ooms() -> None:
    points = pl.DataFrame(
        {
            "seq": range(10_000),
            "time_us": range(10_000),
            "action": ["alloc"] * 10_000,
            "size": [1] * 10_000,
            "allocated_bytes": [(i * 7919) % 1000 for i in range(10_000)],
            "active_bytes": [0] * 10_000,
            "reserved_bytes": [5] * 10_000,
            "is_oom": [i == 4321 for i in range(10_000)],
        }
    ).with_columns(pl.when(pl.col("seq") == 777).then(5000).otherwise("allocated_bytes").alias("allocated_bytes"))
    small = downsample(points, 200)
    assert small.height <= 200
    assert 777 in small["seq"].to_list() and 4321 in small["seq"].to_list()
    assert small["allocated_bytes"].max() == 5000 and small["allocated_bytes"].min() == 0
    assert small["seq"].is_sorted()


@pytest.mark.parametrize(
    ("scenario", "name"),
    [
        ("serve_leak", "snapshot_end"),
        ("serve_leak", "snapshot_first_oom"),
        ("serve_mixed", "snapshot_first_oom"),
    ],
)
def test_layout_replay_agrees_with_the_timeline_view(scenario: str, name: str) -> None:
    """Two replays of the same trace (Python block layout, SQL running sums) meet at every OOM."""
    con = case_db(scenario, name)
    for moment in oom_moments(con, 1):
        allocated, reserved = con.execute(
            "SELECT allocated_bytes, reserved_bytes FROM fct_snapshot_timeline WHERE snapshot_id = 1 AND seq = ?",
            [moment.seq],
        ).fetchall()[0]
        assert moment.reserved_bytes == reserved
        # The layout knows exact block sizes of blocks alive at the end; the view rounds every request.
        assert abs(moment.allocated_bytes - allocated) < 1 << 20


@pytest.mark.parametrize("scenario", ["serve_leak", "model_swap", "fragmentation_expandable"])
def test_python_replay_equals_the_timeline_view(scenario: str) -> None:
    """The polars replay (fast) and the SQL view (for SQL users) are one definition, checked here."""
    name = "snapshot_after_empty_cache" if scenario.startswith("fragmentation") else "snapshot_end"
    con = case_db(scenario, name)
    full, _start = replay(con, 1, 0)
    columns = ["seq", "allocated_bytes", "active_bytes", "reserved_bytes", "is_oom"]
    view = con.sql(f"SELECT {', '.join(columns)} FROM fct_snapshot_timeline WHERE snapshot_id = 1 ORDER BY seq").pl()
    assert full.select(columns).equals(view)
