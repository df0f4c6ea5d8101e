"""Forecast of water levels: a synthetic seasonal trend, and the sample fleet's leaking instances projected
to 95 % while the stable ones are not."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from oomlab.analyses.fleet import forecast
from oomlab.analyses.fleet.forecast import fit_trend, hour_profile
from oomlab.findings import forecast as forecast_findings

from conftest import FLEET

TRUTHS = json.loads((FLEET / "truths.json").read_text())
# While v1.5 leaks: after the watchdog restarts of 11-22/11-23 on the A10s, before those of 11-25.
DURING_LEAK = datetime(2026, 11, 24, 12)
REQUEST_LOGS = {i["name"] for i in TRUTHS["instances"] if i["log"] == "requests"}
LEAKING = sorted(set(TRUTHS["leak"]["bytes_per_hour"]) & REQUEST_LOGS)
CACHE = TRUTHS["cache_growth"]["instance"]
STABLE = sorted(
    i["name"]
    for i in TRUTHS["instances"]
    if i["log"] == "requests" and i["leak_bytes_per_hour"] == 0 and i["name"] != CACHE
)


@pytest.fixture(scope="module")
def during(fleet_con) -> dict[str, dict]:
    return {r["instance"]: r for r in forecast.forecast(fleet_con, until=DURING_LEAK).iter_rows(named=True)}


def test_fit_trend_line() -> None:
    days = np.arange(0, 5, 1 / 24)
    trend = fit_trend(days, 0.2 + 0.05 * days)
    assert trend.slope_per_day == pytest.approx(0.05) and trend.intercept == pytest.approx(0.2)
    assert trend.r2 == pytest.approx(1.0) and trend.rising
    assert not fit_trend(days, np.full_like(days, 0.3)).rising


def test_hour_profile_separates_the_day_from_the_trend() -> None:
    hours = [datetime(2026, 1, 1) + timedelta(hours=h) for h in range(24 * 6)]
    days = np.arange(len(hours)) / 24
    daily = 0.05 * np.sin(2 * np.pi * (np.arange(len(hours)) % 24) / 24)
    device = pl.DataFrame(
        {
            "lifetime": [1] * len(hours),
            "days": days,
            "hod": [h.hour for h in hours],
            "held_level": 0.3 + 0.02 * days + daily,
        }
    )
    profile = hour_profile(device, "held_level")
    assert np.allclose(profile, daily[:24], atol=0.005)


def test_leaking_instances_reach_95_percent(during) -> None:
    assert set(LEAKING) == {"a10-03", "a10-04", "a10-05", "a100-02", "a100-03", "a100-05"}
    for name in LEAKING:
        row = during[name]
        assert row["days_to_95"] is not None, name
        assert row["model_version"] == TRUTHS["leak"]["model_version"]
        assert row["growth"] == "allocated", name
        assert row["expected_ooms"] > 0, name
    for name in ("a10-03", "a10-04", "a10-05"):  # climbing ~11 % of the card a day from ~40 %
        row = during[name]
        assert 0 < row["days_to_80"] < row["days_to_95"] < 7
        assert row["date_95"] > DURING_LEAK
        # the fitted climb matches the planted bytes per hour (weekday traffic runs above the average)
        per_hour = row["allocated_slope_per_day"] * row["device_total"] / 24
        assert per_hour == pytest.approx(TRUTHS["leak"]["bytes_per_hour"][name], rel=0.25)


def test_stable_instances_do_not(during) -> None:
    assert {"a10-01", "a10-02", "a100-01"} <= set(STABLE)
    for name in STABLE:
        row = during[name]
        assert row["growth"] == "none" and row["days_to_80"] is None and row["days_to_95"] is None, name
        assert row["expected_ooms"] == 0


def test_cache_growth_is_not_a_leak(during) -> None:
    row = during[CACHE]
    assert row["growth"] == "allocator_cache"
    assert row["allocated_slope_per_day"] == pytest.approx(0, abs=1e-6)
    assert row["expected_ooms"] == 0
    # 2 GiB a day on an 80 GB card
    per_day = TRUTHS["cache_growth"]["reserved_growth_per_day"] / TRUTHS["cards"]["A100"]["device_total"]
    assert row["slope_per_day"] == pytest.approx(per_day, rel=0.25)


def test_after_the_fix_nothing_leaks(fleet_con) -> None:
    rows = {r["instance"]: r for r in forecast.forecast(fleet_con).iter_rows(named=True)}
    for name in LEAKING:
        assert rows[name]["model_version"] == TRUTHS["leak"]["fixed_by"]
        assert rows[name]["growth"] == "none", name
    assert rows["gpu-b-1"]["reason"] == "lifetime_too_short"  # a capture of 36 seconds


def test_forecast_findings(fleet_con) -> None:
    found = {f.subject: f for f in forecast_findings.findings(fleet_con, until=DURING_LEAK)}
    assert {f.kind for f in found.values()} == {"forecast"}
    assert {"a10-03", "a10-04", "a10-05", "a100-02", "a100-03"} <= set(found)
    assert not set(STABLE) & set(found)
    leak = found["a10-03"]
    assert leak.impact > 0 and leak.confidence >= 0.8
    assert leak.window is not None and leak.window.start == DURING_LEAK and leak.window.end > DURING_LEAK
    assert "95 % on 2026-11-2" in leak.evidence
    assert found[CACHE].confidence == 0.3 and found[CACHE].impact == 0
