"""Periodicity: hours above their traffic, recurring windows found from the data alone, and no window
reported twice when a calendar job explains it."""

from __future__ import annotations

import json

import polars as pl
import pytest
from test_jobs import DAYS, SPIKE, tiny_fleet

from oomlab.analyses.fleet import periodicity
from oomlab.analyses.fleet.aggregates import oom_rates
from oomlab.findings import periodic_window

from conftest import FLEET

TRUTHS = json.loads((FLEET / "truths.json").read_text())
BACKUP = TRUTHS["backup"]


def test_fleet_hours_above_traffic_are_the_backup_hours(fleet_con) -> None:
    hours = periodicity.hour_of_day(fleet_con)
    assert hours["hour_of_day"].to_list() == list(range(24))
    flagged = hours.filter(pl.col("significant"))["hour_of_day"].to_list()
    assert 1 in flagged and set(flagged) <= {1, 2}  # the backup runs 01:00-02:30
    # the expectation redistributes the OOMs, it does not invent any
    assert hours["expected"].sum() == pytest.approx(hours["ooms"].sum())
    by_hour = oom_rates(fleet_con, "hour_of_day")
    assert hours["requests"].to_list() == by_hour["requests"].to_list()
    assert hours["oom_rate_per_1k"].to_list() == pytest.approx(by_hour["oom_rate_per_1k"].to_list())


def test_no_weekday_stands_out_in_the_sample_fleet(fleet_con) -> None:
    days = periodicity.day_of_week(fleet_con)
    assert days["day_of_week"].to_list() == list(range(1, 8))
    assert not days["significant"].any()


def test_the_backup_window_is_found_from_the_data_alone(fleet_con) -> None:
    windows = periodicity.periodic_windows(fleet_con, explained=())
    assert sorted(windows["instance"]) == BACKUP["affected_hosts"]
    assert set(windows["start_hour"]) == {1}  # 01:00, as the calendar says
    assert windows["recurring"].all() and (windows["recurrence"] >= 0.75).all()


def test_a_window_the_calendar_explains_is_not_reported_twice(fleet_con) -> None:
    explained = periodicity.explained_pairs(fleet_con)
    assert explained == [(BACKUP["job"], h) for h in BACKUP["affected_hosts"]]
    assert not periodicity.host_hours(fleet_con, explained=explained)["significant"].any()
    assert periodicity.periodic_windows(fleet_con, explained=explained).is_empty()
    assert periodic_window.findings(fleet_con) == []


# h2: 6 extra OOMs every evening at 20:00 that no calendar lists; h3: a burst of 30 at 15:00 on one day only
TINY = (
    f"{SPIKE} OR (host = 'h2' AND m >= 1200 AND m < 1260 AND m % 10 = 0)"
    " OR (host = 'h3' AND d = 4 AND m >= 900 AND m < 930)"
)


@pytest.fixture(scope="module")
def tiny():
    return tiny_fleet(TINY, [("backup", 180, 240, ["h1", "h2"])])


def test_an_unexplained_daily_window_is_reported(tiny) -> None:
    (finding,) = periodic_window.findings(tiny)
    assert finding.kind == "periodic_window" and finding.subject == "window 20:00-21:00 UTC on h2"
    assert finding.metrics["hosts"] == ["h2"] and finding.metrics["days_above"] == DAYS
    assert finding.window.recurring == "daily 20:00-21:00 UTC"
    assert "Find what runs at 20:00-21:00 UTC on hosts h2" in finding.advice
    assert finding.impact == pytest.approx(6 * DAYS, abs=3)


def test_a_one_day_burst_is_significant_but_not_recurring(tiny) -> None:
    windows = periodicity.periodic_windows(tiny)
    burst = windows.filter(pl.col("instance") == "h3").row(0, named=True)
    assert burst["window_utc"] == "15:00-16:00" and burst["p_value"] < 1e-6
    assert (burst["days_above"], burst["recurring"]) == (1, False)  # only the day of the burst
    # the backup's window on h1 is explained by the calendar; from the data alone it is found
    assert windows.filter(pl.col("instance") == "h1").is_empty()
    alone = periodicity.periodic_windows(tiny, explained=())
    assert alone.filter(pl.col("instance") == "h1")["window_utc"].to_list() == ["03:00-04:00"]


def test_runs_of_hours_wrap_past_midnight() -> None:
    assert periodicity.circular_runs([0, 1, 5, 22, 23]) == [[22, 23, 0, 1], [5]]
    assert periodicity.circular_runs(list(range(24))) == [list(range(24))]
    assert periodicity.circular_runs([]) == []
