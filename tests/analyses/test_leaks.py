"""Leak detection from request logs, against the real H200 captures and the sample fleet's planted truths."""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from oomlab.analyses.fleet import leaks
from oomlab.findings import leak
from oomlab.findings.finding import Finding

from conftest import FLEET, H200

GIB = 1 << 30
MIB = 1 << 20
TRUTHS = json.loads((FLEET / "truths.json").read_text(encoding="utf-8"))
LEAK = TRUTHS["leak"]


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


@pytest.fixture(scope="module")
def lives(fleet_con) -> pl.DataFrame:
    return leaks.lifetimes(fleet_con)


def _one(lives: pl.DataFrame, instance: str) -> dict:
    rows = lives.filter(pl.col("instance") == instance)
    assert rows.height == 1, rows
    return rows.row(0, named=True)


# --- the fit ---------------------------------------------------------------------------------------------


def test_theil_sen_ignores_one_odd_window():
    x = np.arange(10, dtype=float)
    y = 100 + 5 * x
    y[3] = 1000  # a window whose minimum was a fluke
    fit = leaks.theil_sen(x, y)
    assert fit.slope == pytest.approx(5.0)
    assert fit.rising_share == pytest.approx(8 / 9)


def test_theil_sen_flat_series_has_no_slope_and_no_fit():
    fit = leaks.theil_sen(np.arange(6, dtype=float), np.full(6, 7.0))
    assert (fit.slope, fit.r2, fit.rising_share) == (0.0, 0.0, 0.0)


# --- real H200 captures ----------------------------------------------------------------------------------


def test_serve_leak_is_a_leak_from_0_42_to_4_6_gib(lives, fleet_con):
    life = _one(lives, "gpu-a-0")
    assert life["is_leak"] and not life["is_cache_growth"]
    assert life["baseline_start_bytes"] / GIB == pytest.approx(0.42, abs=0.01)
    assert life["baseline_end_bytes"] / GIB == pytest.approx(4.6, abs=0.2)
    assert life["r2"] >= 0.8 and life["rising_share"] == 1.0
    # the capture's own last word: allocated_after ends at 4.59 GiB, never back to the baseline
    query = "SELECT arg_max(allocated_after, ts) FROM requests WHERE instance = 'gpu-a-0'"
    last = fleet_con.sql(query).fetchall()[0][0]
    assert last / GIB == pytest.approx(4.6, abs=0.01)
    # at its 5 GiB cap the baseline plus a typical request no longer fits: the OOM is due now
    assert life["limit_bytes"] <= 5 * GIB and life["hours_to_oom"] == 0.0


def test_cache_bloat_is_cache_growth_not_a_leak(lives):
    life = _one(lives, "gpu-c-2")
    assert not life["is_leak"] and life["is_cache_growth"]
    assert life["baseline_start_bytes"] == life["baseline_end_bytes"] == 2 * GIB
    assert life["reserved_low_bytes"] / GIB == pytest.approx(2.21, abs=0.01)
    assert life["reserved_end_bytes"] / GIB == pytest.approx(4.80, abs=0.01)
    assert life["hours_to_oom"] is None


def test_serve_mixed_is_not_a_leak(lives):
    life = _one(lives, "gpu-b-1")
    assert not life["is_leak"]
    assert life["baseline_start_bytes"] == life["baseline_end_bytes"]
    assert life["baseline_end_bytes"] / GIB == pytest.approx(0.35, abs=0.01)


# --- the sample fleet ------------------------------------------------------------------------------------


def _fleet(lives: pl.DataFrame) -> pl.DataFrame:
    return lives.filter(pl.col("model_version").str.starts_with("assist-"))


def test_only_the_planted_version_leaks_and_every_lifetime_of_it_does(lives):
    fleet = _fleet(lives)
    leaking = fleet.filter(pl.col("is_leak"))
    assert leaking["model_version"].unique().to_list() == [LEAK["model_version"]]
    planted = fleet.filter(pl.col("model_version") == LEAK["model_version"])
    assert planted["is_leak"].all() and planted["r2"].min() >= 0.9
    versions = leaks.leaking_versions(fleet)
    assert versions.filter(pl.col("leaks"))["model_version"].to_list() == [LEAK["model_version"]]


def test_the_leak_starts_at_the_planted_deploy(lives):
    start, instance, is_deploy = leaks.first_deploy(lives, LEAK["model_version"])
    first = min(LEAK["deploys"], key=LEAK["deploys"].get)
    assert (instance, is_deploy) == (first, True)
    # the deploy restarts the process: its first request comes within the 2 minutes down plus a few
    assert timedelta(0) <= start - _ts(LEAK["deploys"][first]) <= timedelta(minutes=10)


def test_lifetimes_and_restarts_match_the_planted_ones(lives):
    for inst in TRUTHS["instances"]:
        if inst["log"] != "requests":
            continue
        found = lives.filter(pl.col("instance") == inst["name"]).sort("start")
        planted = [_ts(r["ts"]) for r in inst["restarts"]]
        assert found.height == len(planted) + 1, inst["name"]
        for restart, row in zip(planted, found.tail(len(planted)).iter_rows(named=True), strict=True):
            assert timedelta(0) <= row["start"] - restart <= timedelta(minutes=30), (inst["name"], restart)
        reasons = found["restart_reason"].to_list()[1:]
        expected = ["version_change" if r["reason"] == "deploy" else "baseline_drop" for r in inst["restarts"]]
        assert reasons == expected, inst["name"]


def test_leak_rates_match_the_planted_bytes_per_hour(lives):
    for instance, planted in LEAK["bytes_per_hour"].items():
        rows = lives.filter((pl.col("instance") == instance) & pl.col("is_leak"))
        if rows.is_empty():  # a100-06 logs only text
            continue
        assert rows["slope_bytes_per_hour"].mean() == pytest.approx(planted, rel=0.25), instance


def test_cache_growth_and_flat_pool_instances_are_not_leaks(lives):
    growth = lives.filter(pl.col("instance") == TRUTHS["cache_growth"]["instance"])
    assert not growth["is_leak"].any() and growth["is_cache_growth"].all()
    assert (growth["reserved_growth_bytes"] > 10 * GIB).all()
    frag = TRUTHS["fragmentation"]
    pool = lives.filter((pl.col("instance") == frag["instance"]) & (pl.col("model_version") != LEAK["model_version"]))
    assert not pool["is_leak"].any()
    assert (pool["baseline_start_bytes"] == frag["allocated_baseline"]).all()


def test_projected_time_to_oom_comes_before_the_watchdog(lives):
    a10 = lives.filter(pl.col("is_leak") & pl.col("instance").str.starts_with("a10-"))
    # the watchdog restarts at 50 % of the device, about 3 days in; a typical (p95) request would run out
    # of room some days after a restart, never in the past and never weeks away
    assert a10["hours_to_oom_from_start"].min() > 24
    assert a10["hours_to_oom_from_start"].max() < 150


def test_stopgap_restart_comes_before_the_first_leak_oom_of_any_lifetime(fleet_con, lives):
    every = next(f for f in leak.findings(fleet_con) if f.subject.endswith(LEAK["model_version"])).metrics[
        "restart_every_hours"
    ]
    with gzip.open(FLEET / "oom_causes.csv.gz", "rb") as handle:
        causes = pl.read_csv(handle.read()).filter(pl.col("cause") == "leak")
    ts = pl.col("ts").str.to_datetime("%Y-%m-%dT%H:%M:%S%.3fZ", time_unit="us")
    in_lifetime = (
        causes.with_columns(ts)
        .sort("ts")
        .join_asof(
            lives.select("instance", "start").sort("start"),
            left_on="ts",
            right_on="start",
            by="instance",
            check_sortedness=False,
        )
    )
    after = (pl.col("ts").min() - pl.col("start").first()).alias("after")
    first = in_lifetime.group_by("instance", "start").agg(after)
    assert first.height == 12  # every A10 lifetime of the leaking version had leak OOMs
    assert 0 < every < first["after"].min().total_seconds() / 3600


def test_since_keeps_the_lifetimes_overlapping_the_range(fleet_con, lives):
    since = datetime(2026, 12, 1)
    later = leaks.lifetimes(fleet_con, since=since)
    assert later.height > 0 and (later["end"] >= since).all()
    assert later.height < lives.height


# --- the finding -----------------------------------------------------------------------------------------


def test_leak_findings_name_the_version_its_deploy_and_its_ooms(fleet_con):
    found = {f.subject: f for f in leak.findings(fleet_con)}
    planted = found[f"model_version {LEAK['model_version']}"]
    assert isinstance(planted, Finding) and planted.kind == "leak"
    assert planted.impact == LEAK["ooms"] and planted.confidence >= 0.9
    assert planted.metrics["first_deploy_instance"] == min(LEAK["deploys"], key=LEAK["deploys"].get)
    logged = {k: v for k, v in LEAK["watchdog_restarts"].items() if k != "a100-06"}  # a100-06 logs text only
    assert planted.metrics["restarts"] == sum(len(v) for v in logged.values())
    assert "fix the leak in model version assist-1.8b-v1.5" in planted.advice
    assert "restart every" in planted.advice
    assert "roll back to assist-1.8b-v1.4" in planted.advice
    assert "2026-11-19 10:02" in planted.evidence
    assert set(found) == {f"model_version {LEAK['model_version']}", "model_version llama-mini-v2"}


def _allocated_after(capture: str) -> np.ndarray:
    """allocated_after of a real H200 capture's successful requests, in order."""
    with gzip.open(H200 / capture / "requests.jsonl.gz", "rt") as handle:
        rows = [json.loads(line) for line in handle]
    return np.array([r["allocated_after"] for r in rows if r["status"] == "ok"], dtype=float)


def test_a_slow_leak_written_in_coarse_units_is_a_climb():
    """serve_leak's climbing allocated_after (0.42 to 4.6 GiB over 44 requests), slowed down and written as GiB
    with two decimals (10.7 MB steps), as the logs of bench/truth.py fleet 60617 write it: most windows show no
    change, then one unit more. Flat steps are no evidence against the climb."""
    real = _allocated_after("serve_leak")
    slow = real[0] + (real - real[0]) / 40  # about 100 MiB over the lifetime: a unit every few windows
    coarse = np.round(slow / GIB, 2) * GIB
    hours = np.arange(len(coarse), dtype=float) / 4
    fit = leaks.theil_sen(hours, coarse)
    assert np.mean(np.diff(coarse) == 0) > 0.5  # most steps are flat
    assert fit.rising_share == 1.0 and leaks._is_leak(fit, len(coarse), int(coarse[0]), int(coarse[-1]))


def test_one_buffer_allocated_once_is_no_climb():
    """serve_mixed's allocated_after (the same bytes after every request) with one permanent 100 MiB rise half way:
    a buffer allocated once. One rising step is no climb, however well a line fits it."""
    real = _allocated_after("serve_mixed")
    stepped = real + np.where(np.arange(len(real)) >= len(real) // 2, 100 * MIB, 0)
    hours = np.arange(len(stepped), dtype=float) / 4
    fit = leaks.theil_sen(hours, stepped)
    assert fit.rising_share == 0.0
    assert not leaks._is_leak(fit, len(stepped), int(stepped[0]), int(stepped[-1]))
