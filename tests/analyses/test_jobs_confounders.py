"""Jobs against what else happens at their hours, on the harness's seeded scenario fleets
(`sample_logs/generate.py --scenario --classic --seed S`, the truths they write say what was planted):

- 47014: `batch-eval` (`infer-c-*`, a 61 GiB process) while the control hosts infer-b-2/3 run `reindex`
  at overlapping hours; a control host running another job then is no control.
- 47009: `finetune-lora` and `feature-backfill` never start (their 91 GB processes do not fit), but a leak
  fails request after request on their hosts until the operator restarts, and two bursts fall in their
  windows; OOMs the leak alone explains fail whatever runs beside them.
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


def _effects(tmp_path_factory: pytest.TempPathFactory, seed: int) -> tuple[dict, dict[str, dict]]:
    out = tmp_path_factory.mktemp(f"fleet{seed}") / "fleet"
    assert generate.main(["--scenario", "--classic", "--seed", str(seed), "--out", str(out)]) == 0
    truths = json.loads((out / "truths.json").read_text())
    db = out.parent / "fleet.duckdb"
    api.ingest(db, [str(out)], IngestOptions(tz=truths["time"]["ingest_tz"]))
    con = duckdb.connect(str(db), read_only=True)
    try:
        return truths, {row["name"]: row for row in jobs.job_effects(con).to_dicts()}
    finally:
        con.close()


@pytest.fixture(scope="module")
def busy_control(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict[str, dict]]:
    return _effects(tmp_path_factory, 47014)


@pytest.fixture(scope="module")
def leak_bursts(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict[str, dict]]:
    return _effects(tmp_path_factory, 47009)


def test_a_control_host_running_another_job_is_no_control(busy_control) -> None:
    truths, effects = busy_control
    planted = {c["subject"].removeprefix("job "): c for c in truths["causes"] if c["kind"] == "scheduled_job"}
    assert set(planted) == {"batch-eval", "reindex"}
    for name, cause in planted.items():
        row = effects[name]
        assert row["verdict"] == "reported", name
        assert row["ooms_in"] == cause["ooms"]  # every OOM the job caused, none of the others'
        # reindex's and batch-eval's hosts are each other's controls only outside the other job's hours; the
        # control hosts' other OOMs are the planted leak's (set aside as the process's own), so the control may
        # have no OOM left at all: no lift, rather than one at the job's level
        assert row["control_lift"] is None or row["control_lift"] < jobs.MIN_LIFT
    assert {d["name"] for d in truths["decoys"]} & {
        n for n, r in effects.items() if r["verdict"] == "reported"
    } == set()


def test_leak_bursts_in_a_jobs_windows_are_not_the_jobs(leak_bursts) -> None:
    truths, effects = leak_bursts
    never_started = {c["job"] for c in truths["non_causes"] if c["kind"] == "neighbour_without_ooms"}
    assert never_started == {"finetune-lora", "feature-backfill"}
    for name in never_started:
        row = effects[name]
        assert row["verdict"] == "no OOMs inside" and row["ooms_in"] == 0
        assert row["intrinsic_in"] >= 18  # the leak's OOMs that fell inside, set aside
