"""A leak's rate in the units its window supports: the real H200 serve_leak capture is one 18.7-second process
of 47 requests, so its leak is stated per request and over its real span, never as GiB per hour, and the
stopgap restart interval is a whole number of requests, never less than one."""

from __future__ import annotations

import math
import re
from datetime import datetime
from pathlib import Path

import pytest

from oomlab import api
from oomlab.analyses.fleet.leaks import RATE_HOURS, RESTART_HEADROOM_SHARE, lifetimes
from oomlab.config import IngestOptions
from oomlab.findings import leak
from oomlab.findings.leak import _growth_evidence, _stopgap
from oomlab.load.tables import connect

from conftest import H200, read_jsonl_gz

REQUESTS = H200 / "serve_leak" / "requests.jsonl.gz"


def _ts(row: dict) -> datetime:
    return datetime.fromisoformat(row["ts"].replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    db = tmp_path_factory.mktemp("serve_leak") / "leak.duckdb"
    report = api.ingest(db, [str(REQUESTS)], IngestOptions())
    assert [r.message for r in report.failed] == []
    con = connect(db)
    try:
        return leak.findings(con), lifetimes(con)
    finally:
        con.close()


def test_the_short_capture_is_stated_per_request_and_over_its_real_span(found: tuple):
    findings, _ = found
    [finding] = findings
    rows = read_jsonl_gz(REQUESTS)
    seconds = (_ts(rows[-1]) - _ts(rows[0])).total_seconds()
    assert len(rows) == 47 and seconds == pytest.approx(18.717) and seconds < RATE_HOURS * 3600
    m = finding.metrics
    assert m["rate_unit"] == "request"
    assert m["median_slope_bytes_per_hour"] is None and m["restart_every_hours"] is None
    assert (m["longest_leaking_requests"], m["longest_leaking_seconds"]) == (47, pytest.approx(seconds))
    # the growth is the log's own: the lowest allocated_after of the first requests to that of the last ones
    climb = rows[-1]["allocated_after"] - rows[0]["allocated_after"]
    assert m["longest_leaking_growth_bytes"] == pytest.approx(climb, rel=0.05)
    assert m["median_growth_bytes_per_request"] == pytest.approx(m["longest_leaking_growth_bytes"] / 47)
    assert "/h" not in finding.evidence and "/h" not in finding.advice
    assert "+4.05 GiB over 47 requests in 18.7 s, 88 MiB per request" in finding.evidence
    assert "allocated baseline +88 MiB per request" in finding.advice


def test_the_stopgap_is_whole_requests_never_less_than_one(found: tuple):
    findings, lives = found
    [finding] = findings
    life = lives.row(0, named=True)
    room = RESTART_HEADROOM_SHARE * (life["limit_bytes"] - life["baseline_start_bytes"])
    every = finding.metrics["restart_every_requests"]
    assert every == math.floor(room / finding.metrics["median_growth_bytes_per_request"]) == 4
    assert re.search(r"restart every 4 requests as a stopgap", finding.advice)
    assert not re.search(r"restart every \d+ (s|min)\b", finding.advice)


def _version(**values: object) -> dict:
    base = {
        "leaking_lifetimes": 1,
        "median_slope_bytes_per_hour": None,
        "min_slope_bytes_per_hour": None,
        "max_slope_bytes_per_hour": None,
        "median_growth_bytes_per_request": 300 << 20,
        "longest_leaking_growth_bytes": 3 << 30,
        "longest_leaking_requests": 10,
        "longest_leaking_seconds": 5.0,
        "restart_every_hours": None,
        "restart_every_requests": 0,
    }
    return base | values


def test_a_request_that_leaks_more_than_the_headroom_gets_no_interval():
    assert _stopgap(_version()).startswith("; no restart interval keeps ahead of it")
    assert _stopgap(_version(restart_every_requests=1)) == "; restart every 1 request as a stopgap"


def test_hours_of_service_keep_the_hourly_rate():
    hourly = _version(
        leaking_lifetimes=2,
        median_slope_bytes_per_hour=120 << 20,
        min_slope_bytes_per_hour=90 << 20,
        max_slope_bytes_per_hour=180 << 20,
        restart_every_hours=11.0,
    )
    assert _growth_evidence(hourly) == "median 120 MiB/h, 90 MiB/h to 180 MiB/h"
    assert _stopgap(hourly) == "; restart every 11 h as a stopgap"
    short = _version(leaking_lifetimes=3, restart_every_requests=7)
    assert _growth_evidence(short).startswith("median 300 MiB per request; the longest lifetime +3")


def test_fleet_leaks_over_days_stay_per_hour(fleet_db: Path):
    con = connect(fleet_db)
    try:
        findings = {f.subject: f for f in leak.findings(con)}
    finally:
        con.close()
    days = findings["model_version assist-1.8b-v1.5"]
    assert days.metrics["rate_unit"] == "hour" and days.metrics["longest_leaking_seconds"] > 24 * 3600
    assert re.search(r"restart every \d+ h as a stopgap", days.advice)
    assert findings["model_version llama-mini-v2"].metrics["rate_unit"] == "request"
