"""The incident page shows each site's growth when the database holds several snapshots of the instance: the
real serve_leak request log and both of its real snapshots, ingested under the instance's file names."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from oomlab import api
from oomlab.cli.main import cli

from conftest import H200

FIRST_OOM = datetime(2026, 11, 30, 1, 49, 36, 527000)  # request gpu-a-0-00039, recorded by snapshot_first_oom
LAST_OOM = datetime(2026, 11, 30, 1, 49, 37, 866000)  # request gpu-a-0-00047, recorded by snapshot_end


@pytest.fixture(scope="module")
def leak_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("serve_leak")
    for name in ("snapshot_first_oom", "snapshot_end"):
        shutil.copy(H200 / "serve_leak" / f"{name}.pickle.gz", folder / f"gpu-a-0.{name}.pickle.gz")
    shutil.copy(H200 / "serve_leak" / "requests.jsonl.gz", folder / "requests.jsonl.gz")
    db = folder / "leak.duckdb"
    result = CliRunner().invoke(cli, ["ingest", str(folder), "--db", str(db), "--quiet"])
    assert result.exit_code == 0, result.output
    return db


def test_the_later_incident_shows_the_growth_since_the_first_snapshot(leak_db: Path) -> None:
    report = api.incident_report(leak_db, instance="gpu-a-0", at=LAST_OOM)
    snapshot = report.doc["snapshot"]
    assert snapshot["info"]["file"] == "gpu-a-0.snapshot_end.pickle.gz"
    growth = snapshot["growth"]
    assert [s["file"] for s in growth["snapshots"]] == [
        "gpu-a-0.snapshot_first_oom.pickle.gz",
        "gpu-a-0.snapshot_end.pickle.gz",
    ]
    top = {row["site"]: row for row in growth["sites"][:2]}
    assert top["transformers/cache_utils.py:update:146"]["bytes"] == [2144194560, 2276990976]
    assert all(row["grew"] and row["growth_blocks"] == 40 for row in top.values())
    suspect = snapshot["leak_suspects"][0]
    assert suspect["site"] == "transformers/cache_utils.py:update:146" and suspect["confidence"] == 0.95
    assert "Growth across 2 snapshots of gpu-a-0" in report.html
    assert "grew 126.64 MiB across 2 snapshots, at every step" in report.html


def test_the_first_incident_has_no_earlier_snapshot_to_compare(leak_db: Path) -> None:
    report = api.incident_report(leak_db, instance="gpu-a-0", at=FIRST_OOM)
    snapshot = report.doc["snapshot"]
    assert snapshot["info"]["file"] == "gpu-a-0.snapshot_first_oom.pickle.gz"
    assert snapshot["growth"] is None and "Growth across" not in report.html
    assert snapshot["leak_suspects"][0]["confidence"] == 0.9  # one snapshot, its trace wrapped
