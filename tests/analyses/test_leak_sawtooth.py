"""The sawtooth of the article ("OOM hours after start, restart, OOM again") on every model size.

Derived from the real serve_leak capture (tests/data/h200/serve_leak/requests.jsonl.gz: 47 requests whose
allocated baseline climbs from 0.42 to 4.6 GiB, 3 OOMs at the end): its requests are replayed as LIVES
process lifetimes, each restarted two minutes after its last request (well inside LIFETIME_GAP, so only the
fall of the level can show the restart), with the time stretched so that the leak runs at about 150 MiB an
hour, and WEIGHTS bytes added to every allocated and reserved figure (a larger model holds its weights from
the first request to the last). The card is the weights plus the capture's 5 GiB cap plus 5 GiB, a card
sized for the model. The OOM messages are dropped: their numbers describe the original 5 GiB run.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from oomlab import api
from oomlab.analyses.fleet import leaks
from oomlab.config import IngestOptions
from oomlab.findings import leak as leak_findings
from oomlab.load.tables import connect
from oomlab.units import GIB, MIB

from conftest import H200, read_jsonl_gz

LIVES = 6
LEAK_PER_HOUR = 150 * MIB
BYTE_FIELDS = ("allocated_before", "allocated_after", "reserved_before", "reserved_after", "peak_allocated")
CAP = 5 * GIB


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _sawtooth(weights: int, version: str) -> list[dict]:
    """The serve_leak requests as LIVES lifetimes of a model `weights` bytes larger (see the module doc)."""
    real = read_jsonl_gz(H200 / "serve_leak" / "requests.jsonl.gz")
    t0, t1 = _ts(real[0]["ts"]), _ts(real[-1]["ts"])
    growth = real[-2]["allocated_after"] - real[0]["allocated_before"]
    stretch = (growth / LEAK_PER_HOUR * 3600) / (t1 - t0).total_seconds()
    life = (t1 - t0) * stretch + timedelta(minutes=2)
    rows = []
    for n in range(LIVES):
        for r in real:
            row = {k: v for k, v in r.items() if k not in ("error", "device_free_after")}
            row["ts"] = (t0 + n * life + (_ts(r["ts"]) - t0) * stretch).isoformat()
            row["request_id"] = f"{r['request_id']}-{n}"
            row["model_version"] = version
            row["device_total"] = weights + CAP + 5 * GIB
            for field in BYTE_FIELDS:
                if row.get(field) is not None:
                    row[field] += weights
            rows.append(row)
    return rows


@pytest.fixture(scope="module", params=[0.3, 14, 70, 140], ids=lambda g: f"weights-{g}GiB")
def sawtooth_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    weights = int(request.param * GIB)
    folder = tmp_path_factory.mktemp("sawtooth")
    log = folder / "gpu-a-0.requests.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in _sawtooth(weights, f"llama-{request.param}g")))
    db = folder / "sawtooth.duckdb"
    report = api.ingest(db, [str(log)], IngestOptions())
    assert [r.status for r in report.results] == ["ingested"]
    return db


def test_every_restart_is_seen_and_every_lifetime_leaks(sawtooth_db: Path) -> None:
    with connect(sawtooth_db, read_only=True) as con:
        lives = leaks.lifetimes(con)
    assert lives.height == LIVES
    assert lives["restart_reason"].to_list() == ["start"] + ["baseline_drop"] * (LIVES - 1)
    assert lives["is_leak"].all()
    # each lifetime climbs at the planted rate (the real capture's steps, stretched), within 25 %
    slopes = lives["slope_bytes_per_hour"].to_numpy()
    assert ((slopes > 0.75 * LEAK_PER_HOUR) & (slopes < 1.25 * LEAK_PER_HOUR)).all(), slopes / MIB


def test_the_sawtooth_is_one_leak_finding_with_its_restarts(sawtooth_db: Path) -> None:
    with connect(sawtooth_db, read_only=True) as con:
        (finding,) = leak_findings.findings(con)
    metrics = finding.metrics
    assert (metrics["lifetimes"], metrics["leaking_lifetimes"], metrics["restarts"]) == (LIVES, LIVES, LIVES - 1)
    assert metrics["instances"] == ["gpu-a-0"]
    assert 0.75 * LEAK_PER_HOUR < metrics["median_slope_bytes_per_hour"] < 1.25 * LEAK_PER_HOUR
    # the stopgap: restart before the leak eats 10 % of the room above the starting baseline
    assert metrics["restart_every_hours"] is not None and metrics["restart_every_hours"] > 0
    assert f"{LIVES - 1} restarts dropped it back" in finding.evidence


def test_a_flat_service_of_the_same_size_has_one_lifetime(tmp_path: Path) -> None:
    """serve_mixed (not a leak: allocated_after returns to 0.35 GiB after every request) with 70 GiB of
    weights added, as above: no restart is invented and no leak is found."""
    real = read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")
    weights = 70 * GIB
    rows = []
    for r in real:
        row = {k: v for k, v in r.items() if k not in ("error", "device_free_after")}
        row["device_total"] = weights + 10 * GIB
        for field in BYTE_FIELDS:
            if row.get(field) is not None:
                row[field] += weights
        rows.append(row)
    log = tmp_path / "gpu-b-1.requests.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    api.ingest(tmp_path / "flat.duckdb", [str(log)], IngestOptions())
    with connect(tmp_path / "flat.duckdb", read_only=True) as con:
        lives = leaks.lifetimes(con)
    assert lives.select("lifetime", "restart_reason", "is_leak").rows() == [(1, "start", False)]
    assert pl.Series(lives["baseline_start_bytes"]).item() > weights


def test_a_new_process_id_is_a_restart_whatever_the_memory_did(tmp_path: Path) -> None:
    """The 140 GiB sawtooth above, its lines carrying the serving process's id (`pid`, a field of their own
    that lands in `extra`): each lifetime starts at its new pid. And serve_mixed, flat, restarted once
    halfway (the second half logged by another pid): two lifetimes although the level never moved."""
    rows = _sawtooth(140 * GIB, "llama-140g")
    per_life = len(rows) // LIVES
    for i, row in enumerate(rows):
        row["pid"] = 4242 + i // per_life
    flat = read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")
    for i, row in enumerate(flat):
        row["pid"] = 1000 if i < len(flat) // 2 else 1001
    (tmp_path / "gpu-a-0.requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "gpu-b-1.requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in flat))
    api.ingest(tmp_path / "pid.duckdb", [str(tmp_path)], IngestOptions())
    with connect(tmp_path / "pid.duckdb", read_only=True) as con:
        lives = leaks.lifetimes(con)
    leaking = lives.filter(pl.col("instance") == "gpu-a-0")
    assert leaking["restart_reason"].to_list() == ["start"] + ["process_start"] * (LIVES - 1)
    assert leaking["is_leak"].all()
    flat_lives = lives.filter(pl.col("instance") == "gpu-b-1")
    assert flat_lives.select("restart_reason", "is_leak").rows() == [("start", False), ("process_start", False)]
    with connect(tmp_path / "pid.duckdb", read_only=True) as con:
        (finding,) = leak_findings.findings(con)
    assert finding.metrics["restarts"] == LIVES - 1


def test_lifetimes_too_short_to_show_the_leak_are_counted_apart(tmp_path: Path) -> None:
    """The 14 GiB sawtooth above, and on the same host's second GPU the same version restarted three times
    within two minutes (serve_mixed's 101 flat requests, 36 s each time, 14 GiB added, a pid per start): at
    150 MiB/h a 36-second lifetime would grow by 1.5 MiB, far under the 64 MiB a leak must show, so those three
    are no evidence against the leak and the finding says they were left out."""
    version = "llama-14g"
    rows = _sawtooth(14 * GIB, version)
    flat = read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")
    t0 = _ts(flat[0]["ts"])
    for n in range(3):
        for r in flat:
            row = {k: v for k, v in r.items() if k not in ("error", "device_free_after")}
            row.update(instance="gpu-a-0", gpu_index=1, model_version=version, pid=7000 + n)
            row["ts"] = (_ts(r["ts"]) + n * timedelta(minutes=1) - t0 + _ts(rows[0]["ts"])).isoformat()
            row["device_total"] = 24 * GIB
            for field in BYTE_FIELDS:
                if row.get(field) is not None:
                    row[field] += 14 * GIB
            rows.append(row)
    (tmp_path / "gpu-a-0.requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    api.ingest(tmp_path / "short.duckdb", [str(tmp_path)], IngestOptions())
    with connect(tmp_path / "short.duckdb", read_only=True) as con:
        (finding,) = leak_findings.findings(con)
    metrics = finding.metrics
    assert (metrics["lifetimes"], metrics["leaking_lifetimes"], metrics["too_short_lifetimes"]) == (LIVES, LIVES, 3)
    assert f"climbs in {LIVES} of {LIVES} process lifetimes (3 more too short to show it)" in finding.evidence
