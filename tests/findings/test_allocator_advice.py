"""Allocator settings seen anywhere shape the advice: what a process already runs with is not advised again, the
next step is, with why. The test is the real H200 capture that ran with expandable_segments:True and still
fragmented (its snapshots record the setting and mark their segments expandable); settings stated by a text log
and by oomlab.capture's request lines are read into allocator_settings."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from oomlab import api
from oomlab.analyses.fleet.allocator_settings import AllocatorSettings, allocator_settings, settings_for
from oomlab.capture import Capture, FakeMemory
from oomlab.config import IngestOptions
from oomlab.findings import causes
from oomlab.findings.allocator_advice import cache_option, cache_step, fragmentation_step
from oomlab.load.tables import connect
from oomlab.report.next_steps import next_steps

from conftest import H200

EXPANDABLE = "expandable_segments:True"


def _ingest(db: Path, paths: list[Path], instance: str | None = None) -> None:
    report = api.ingest(db, [str(p) for p in paths], IngestOptions(instance=instance))
    assert [r.message for r in report.failed] == []


def _fragmentation(db: Path) -> list:
    con = connect(db)
    try:
        return [f for f in causes.findings(con) if f.kind == "fragmentation"]
    finally:
        con.close()


@pytest.fixture(scope="module")
def expandable_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole real capture (snapshots, OOM messages, steps, printouts) as one instance."""
    db = tmp_path_factory.mktemp("expandable") / "capture.duckdb"
    _ingest(db, [H200 / "fragmentation_expandable"], instance="h200-frag-expandable")
    return db


def test_the_snapshots_record_expandable_segments(expandable_db: Path):
    con = duckdb.connect(str(expandable_db), read_only=True)
    rows = con.execute(
        "SELECT DISTINCT setting, value, origin FROM fct_allocator_settings WHERE instance = 'h200-frag-expandable'"
    ).fetchall()
    assert rows == [("expandable_segments", "true", "snapshot")]


def test_the_fragmentation_of_the_expandable_capture_is_not_advised_expandable_segments(expandable_db: Path):
    [finding] = _fragmentation(expandable_db)
    assert EXPANDABLE not in finding.advice
    assert finding.metrics["allocator_settings"] == {"expandable_segments": "true"}
    assert finding.metrics["advised_setting"] == "roundup_power2_divisions"
    # the next step, and why the obvious others would not help: the numbers are the capture's own (1.72 GiB)
    assert "already on" in finding.advice and "seen in a snapshot" in finding.advice
    assert "1.72 GiB reserved but unallocated" in finding.advice
    assert "garbage_collection_threshold would not free it" in finding.advice
    assert "roundup_power2_divisions:4" in finding.advice


def test_the_capture_without_the_setting_is_still_advised_expandable_segments(tmp_path: Path):
    db = tmp_path / "frag.duckdb"
    _ingest(db, [H200 / "fragmentation"], instance="h200-frag")
    [finding] = _fragmentation(db)
    assert finding.advice.startswith(f"set PYTORCH_CUDA_ALLOC_CONF={EXPANDABLE} on h200-frag")
    # its snapshot records the setting off: known, and the advice is the setting
    assert finding.metrics["allocator_settings"] == {"expandable_segments": "false"}


def test_a_text_log_and_capture_lines_state_settings(tmp_path: Path):
    log = tmp_path / "serve-1.log"
    log.write_text(
        "2026-11-30 01:00:00 INFO PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,roundup_power2_divisions:4\n"
        "2026-11-30 01:00:01 WARNING PYTORCH_CUDA_ALLOC_CONF is deprecated, use PYTORCH_ALLOC_CONF instead\n",
        encoding="utf-8",
    )
    logs = tmp_path / "capture"
    capture = Capture(logs, instance="cap-1", memory=FakeMemory(device=0, total=150109880320), alloc_conf=EXPANDABLE)
    with capture.request("r1"):
        pass
    capture.close()
    [line] = [json.loads(x) for p in logs.glob("*.jsonl") for x in p.read_text().splitlines()]
    assert line["alloc_conf"] == EXPANDABLE
    db = tmp_path / "settings.duckdb"
    _ingest(db, [log, logs])
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT instance, setting, value, origin, line FROM fct_allocator_settings ORDER BY instance, setting"
    ).fetchall()
    assert rows == [
        ("cap-1", "expandable_segments", "true", "request log", 1),
        ("serve-1", "expandable_segments", "true", "text log", 1),
        ("serve-1", "roundup_power2_divisions", "4", "text log", 1),
    ]


def test_capture_reads_the_setting_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:256")
    capture = Capture(tmp_path, instance="cap-2", memory=FakeMemory(device=0, total=1 << 34))
    with capture.request("r1", note="x"):
        pass
    capture.close()
    [line] = [json.loads(x) for p in tmp_path.glob("*.jsonl") for x in p.read_text().splitlines()]
    assert (line["alloc_conf"], line["note"]) == ("max_split_size_mb:256", "x")
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF")
    quiet = Capture(tmp_path / "none", instance="cap-3", memory=FakeMemory(device=0, total=1 << 34))
    with quiet.request("r1"):
        pass
    quiet.close()
    [line] = [json.loads(x) for p in (tmp_path / "none").glob("*.jsonl") for x in p.read_text().splitlines()]
    assert "alloc_conf" not in line


def _settings(**values: str) -> AllocatorSettings:
    return AllocatorSettings(values, dict.fromkeys(values, "text log"))


def test_each_step_advises_only_what_is_not_on():
    off = fragmentation_step(_settings(), "gpu-1", "2.00 GiB")
    assert off.setting == "expandable_segments"
    rounded = fragmentation_step(_settings(expandable_segments="true", roundup_power2_divisions="4"), "gpu-1", "1 GiB")
    assert rounded.setting is None and "roundup_power2_divisions:" not in rounded.advice.split("already on")[1]
    assert "torch.cuda.MemPool" in rounded.advice
    asynchronous = fragmentation_step(_settings(backend="cudaMallocAsync"), "gpu-1", "1 GiB")
    assert asynchronous.setting == "backend" and "backend:native,expandable_segments:True" in asynchronous.advice
    # a cache that fills the card: expandable segments first, then the garbage collection threshold, then nothing
    assert cache_option(_settings()) == f"PYTORCH_CUDA_ALLOC_CONF={EXPANDABLE}"
    gc = cache_option(_settings(expandable_segments="true"))
    assert gc is not None and gc.startswith("garbage_collection_threshold:0.6") and "60 %" in gc
    spent = _settings(expandable_segments="true", garbage_collection_threshold="0.8")
    assert cache_option(spent) is None and cache_step(spent) == "call empty_cache() between requests"


def test_the_setting_in_effect_is_the_last_one_seen_before_the_moment(expandable_db: Path):
    con = connect(expandable_db)
    try:
        seen = allocator_settings(con)
    finally:
        con.close()
    first = seen["ts"].min()
    assert settings_for(seen, ["h200-frag-expandable"]).is_on("expandable_segments")
    assert settings_for(seen, ["h200-frag-expandable"], first).is_on("expandable_segments")
    assert not settings_for(seen, ["h200-frag-expandable"], first.replace(year=2020)).values
    assert not settings_for(seen, ["another-host"]).values


def test_the_incident_steps_follow_the_settings():
    event = {"instance": "gpu-1", "requested_bytes": 1 << 30, "reserved_unallocated_bytes": 3 << 29}
    verdict = {"cause": "fragmentation"}
    default = next_steps(verdict, event, {"top_sites": []})
    assert default[0].startswith(f"Set PYTORCH_CUDA_ALLOC_CONF={EXPANDABLE} on gpu-1")
    on = next_steps(verdict, event, {"top_sites": []}, _settings(expandable_segments="true"))
    assert EXPANDABLE not in on[0] and on[0].startswith("Expandable_segments is already on for gpu-1")
