"""Request logs that state fewer memory fields than the sample fleet's: the fleet's own requests with fields cut.

- "card only": each request states allocated_before and device_total and no level after or during it (the shape
  bench/startup.py generates). `report weekly` on such a database raised a TypeError in sizing (int(None)) and
  then in forecast (float(None)); now sizing says `no_memory_levels`, forecast gives no trend for that reason,
  and the leak is still found, from allocated_before.
- "no peak": peak_allocated cut. The A10 whose requests peak near the card then shows 17 %, and OOMs: never a
  downsize. "no version": model_version cut. `oomlab findings` raised on both (a None in a format string, and a
  leak of an unnamed version); the leak is now named "(not logged)".
- "reserved only": allocated_after and peak_allocated cut, reserved kept. A full card can then not be told from a
  full cache, and a rising held level not from a leak: sizing falls back to the article's rule alone, and the
  forecast calls the growth `held` and says what to log. A process restart is found from allocated_before alone.
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from oomlab import api
from oomlab.analyses.fleet import forecast, sizing
from oomlab.cli.main import cli
from oomlab.findings import forecast as forecast_findings
from oomlab.findings import leak as leak_findings
from oomlab.load.connection import connect

from conftest import FLEET

TRUTHS = json.loads((FLEET / "truths.json").read_text())
FULL_CARD = "a10-01"  # requests peak near the A10: the fleet's upgrade
LEAKING = "a10-03"  # v1.5's leak, allocated_after climbing
FRAGMENTED = TRUTHS["fragmentation"]["instance"]  # reserved pinned at 98.7 %, allocated low
DURING_LEAK = datetime(2026, 11, 24, 12)  # as tests/analyses/test_forecast.py: between the watchdog's restarts
CUTS = {
    "card_only": ("allocated_after", "reserved_before", "reserved_after", "peak_allocated"),
    "reserved_only": ("allocated_after", "peak_allocated"),
    "no_peak": ("peak_allocated",),
    "no_version": ("model_version",),
}


def _cut_fleet(folder: Path, dropped: tuple[str, ...]) -> Path:
    """The three instances' request logs with the `dropped` fields removed from every record."""
    folder.mkdir()
    for name in (FULL_CARD, LEAKING, FRAGMENTED):
        with gzip.open(FLEET / "requests" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle]
        lines = [json.dumps({k: v for k, v in r.items() if k not in dropped}) for r in records]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module", params=sorted(CUTS))
def cut_db(request, tmp_path_factory) -> tuple[str, Path]:
    """(cut, database) of the cut fleet, ingested by the CLI."""
    work = tmp_path_factory.mktemp(request.param)
    logs = _cut_fleet(work / "logs", CUTS[request.param])
    db = work / "cut.duckdb"
    result = CliRunner().invoke(cli, ["ingest", str(logs), "--db", str(db), "--quiet"])
    assert result.exit_code == 0, result.output
    return request.param, db


def test_weekly_report_and_findings_run(cut_db, tmp_path) -> None:
    _, db = cut_db
    report = api.weekly_report(db)
    doc = json.loads(report.json_text())  # allow_nan=False: no NaN from a level that is not there
    assert doc["window"] and "<html" in report.html
    # `oomlab findings` reads the whole history (the weekly report one week): it raised where the report did not
    out = tmp_path / "findings.json"
    result = CliRunner().invoke(cli, ["findings", "--db", str(db), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())


def test_sizing_without_levels(cut_db) -> None:
    cut, db = cut_db
    with connect(db) as con:
        rows = {r["instance"]: r for r in sizing.sizing(con).iter_rows(named=True)}
    assert set(rows) == {FULL_CARD, LEAKING, FRAGMENTED}
    if cut == "card_only":
        for row in rows.values():
            assert row["action"] == "no_memory_levels"
            assert row["days_seen"] == 0 and row["peak_level"] is None and row["measured_peak_bytes"] is None
            assert row["target_card"] is None and row["device_total"] > 0
            assert row["ooms_in_lookback"] > 0  # OOMs still count: the log says which requests failed
    elif cut == "no_peak":
        # without peak_allocated the A10's request peaks (near the card: the fleet's upgrade) are not in the log,
        # and its held level is 17 %; its OOMs still say the card ran out, so it is not advised smaller
        full_card = rows[FULL_CARD]
        assert full_card["peak_level"] < sizing.DOWNSIZE_LEVEL and full_card["ooms_in_lookback"] > 0
        assert full_card["action"] == "keep"
        assert rows[FRAGMENTED]["allocated_peak_level"] is None and rows[FRAGMENTED]["action"] == "upgrade"
    elif cut == "no_version":
        assert rows[FULL_CARD]["action"] == "upgrade" and rows[FRAGMENTED]["action"] == "fix_allocator"
    else:
        # reserved pinned at 98.7 % of the card, and nothing to show how little of it tensors held
        fragmented = rows[FRAGMENTED]
        assert fragmented["peak_level"] >= sizing.UPGRADE_LEVEL
        assert fragmented["allocated_peak_level"] is None
        assert fragmented["action"] == "upgrade"


def test_forecast_without_levels(cut_db, fleet_con) -> None:
    cut, db = cut_db
    with connect(db) as con:
        rows = {r["instance"]: r for r in forecast.forecast(con, until=DURING_LEAK).iter_rows(named=True)}
        found = {f.subject: f for f in forecast_findings.findings(con, until=DURING_LEAK)}
    if cut == "card_only":
        assert {r["reason"] for r in rows.values()} == {"no_memory_levels"}
        assert found == {}
        return
    if cut != "reserved_only":
        assert rows[LEAKING]["growth"] == "allocated"
        return
    leak = rows[LEAKING]
    # the watchdog's restart is still found from allocated_before alone: the same lifetime as with every field
    whole = forecast.forecast(fleet_con, until=DURING_LEAK).row(by_predicate=pl.col("instance") == LEAKING, named=True)
    assert (leak["lifetime_start"], leak["hours_fitted"]) == (whole["lifetime_start"], whole["hours_fitted"])
    assert leak["days_to_95"] == pytest.approx(whole["days_to_95"])
    assert leak["allocated_level_now"] is None and leak["allocated_slope_per_day"] is None
    assert leak["growth"] == "held"  # reserved climbs with the leaked tensors; allocated is not stated
    assert leak["days_to_95"] is not None and leak["expected_ooms"] == 0.0
    assert "states no allocated memory" in found[LEAKING].evidence
    assert "torch.cuda.memory_allocated()" in found[LEAKING].advice


def test_leak_findings(cut_db) -> None:
    cut, db = cut_db
    with connect(db) as con:
        leaks = leak_findings.findings(con)
    found = {f.subject: sorted(f.metrics["instances"]) for f in leaks}
    # the median rate lies between the two hosts' planted rates, whichever field the baseline is read from
    planted = [TRUTHS["leak"]["bytes_per_hour"][host] for host in (LEAKING, FRAGMENTED)]
    assert min(planted) <= leaks[0].metrics["median_slope_bytes_per_hour"] <= max(planted)
    leaking_hosts = sorted([LEAKING, FRAGMENTED])  # both ran v1.5, whose lifetimes leak
    if cut == "no_version":
        # one unnamed version's lifetimes: the finding names it so, not "None"
        assert found == {f"model_version {leak_findings.UNNAMED_VERSION}": leaking_hosts}
    else:
        # without allocated_after the baseline is allocated_before: the request after one starts with what it left
        assert found == {f"model_version {TRUTHS['leak']['model_version']}": leaking_hosts}
