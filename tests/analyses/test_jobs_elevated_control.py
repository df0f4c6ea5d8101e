"""A job blamed against a control that is itself elevated at the job's hours: only beyond the control's lift.

The fleet is the harness's seeded scenario 7017 (`sample_logs/generate.py --scenario --classic --seed 7017`, full
traffic): `batch-eval` (`a10-*`, 23:05 for 68 min) starts a 10.1 GiB process on both A10s, while the T4s that
do not run it leak and fail most near the fleet's traffic peak at 03:00, so at the job's hours they too fail
twice as often as the rest of the day (a control lift of 2.2, p 1e-4, counting every OOM). The job's hosts failed
572 times as often. The leak's OOMs are now set aside as the process's own (the control's lift falls under
MIN_LIFT); the rule for a control that is elevated at the job's hours is tested on rows below.
"""

from __future__ import annotations

import json
import sys

import duckdb
import pytest

from oomlab import api
from oomlab.analyses.fleet import jobs
from oomlab.config import IngestOptions

from conftest import ROOT

sys.path.insert(0, str(ROOT / "sample_logs"))

import generate


@pytest.fixture(scope="module")
def effects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("elevated") / "fleet"
    assert generate.main(["--scenario", "--classic", "--seed", "7017", "--out", str(out)]) == 0
    truths = json.loads((out / "truths.json").read_text())
    assert {c["subject"] for c in truths["causes"] if c["kind"] == "scheduled_job"} == {"job batch-eval"}
    db = out.parent / "fleet.duckdb"
    api.ingest(db, [str(out)], IngestOptions(tz=truths["time"]["ingest_tz"]))
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {row["name"]: row for row in jobs.job_effects(con).to_dicts()}
    finally:
        con.close()


def test_the_job_is_reported_and_the_controls_leak_set_aside(effects: dict[str, dict]) -> None:
    job = effects["batch-eval"]
    assert job["verdict"] == "reported"
    assert job["hosts_affected"] == ["a10-01", "a10-02"]
    # the control's excess at those hours was its leak's OOMs; they fail whatever runs beside them
    # (jobs.INTRINSIC_RULES), so the control is no longer elevated once they are set aside
    assert job["control_lift"] is None or job["control_lift"] < jobs.MIN_LIFT  # None: the control's OOMs all its own
    assert job["lift"] is None  # no OOM outside its windows once the process's own are set aside


def _row(lift: float, ooms_in: int, expected_in: float) -> dict:
    return {
        "hosts": ["a10-01"], "hosts_matched": ["a10-01"], "ooms_in": ooms_in, "hosts_affected": ["a10-01"],
        "lift": lift, "expected_in": expected_in, "control_lift": 2.2, "control_p_value": 1e-4,
    }  # fmt: skip


def test_a_job_no_worse_than_the_control_is_not_blamed() -> None:
    # a decoy at the control's hours: 11 OOMs where 5 were expected is a lift of 2.2, the control's own
    assert jobs._verdict(_row(2.2, 11, 5.0)) == "control also elevated"
    # twice the control's lift, but too few OOMs to tell apart from it (P(X >= 7 | 4.4) is about 0.15)
    assert jobs._verdict(_row(4.4, 7, 2.0)) == "control also elevated"
    # far beyond it
    assert jobs._verdict(_row(40.0, 200, 5.0)) == "reported"


def test_a_job_without_any_oom_outside_its_windows_is_beyond_an_elevated_control() -> None:
    # harness fleet 31018: feature-backfill's host failed 21 times inside its windows and never outside (no
    # finite lift) while a leaking control failed at 3.6x at the same hours; 21 against 0.54 expected
    row = _row(2.0, 21, 0.54) | {"lift": None, "control_lift": 3.6, "control_p_value": 0.0036}
    assert jobs._verdict(row) == "reported"
