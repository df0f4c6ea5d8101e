"""What the card's own accounting says, on real messages of the corpus (tests/cases/realworld, each case with its
URL): a request the device had room for was refused by a limit outside PyTorch's counters, never by fragmentation
or the card's size; memory in use beyond what PyTorch reserved is a neighbour's only beyond the largest CUDA
context (CONTEXT_MAX_BYTES)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from oomlab import api
from oomlab.analyses.fleet.classify import classify_ooms
from oomlab.config import IngestOptions

REALWORLD = Path(__file__).resolve().parents[1] / "cases" / "realworld"


def _verdict(tmp_path: Path, case: str) -> dict:
    db = _ingested(tmp_path, case)
    con = duckdb.connect(str(db), read_only=True)
    try:
        (row,) = classify_ooms(con).to_dicts()
    finally:
        con.close()
    return row


def _ingested(tmp_path: Path, case: str) -> Path:
    (artifact,) = next(REALWORLD.glob(case + "*")).glob("artifact.*")
    db = tmp_path / "case.duckdb"
    if not db.exists():
        api.ingest(db, [str(artifact)], IngestOptions())
    return db


@pytest.mark.parametrize(
    "case, free, requested",
    [
        ("oom/083_", "203.49 GiB", "2 MiB"),  # ROCm, 14.93 GiB reserved but unallocated: no fragmentation
        ("oom/047_", "66.43 GiB", "20 MiB"),  # vLLM's cumem allocator asleep
        ("oom/070_", "14.71 GiB", "1.19 GiB"),
    ],
)
def test_room_on_the_device_is_a_limit_outside_pytorch(tmp_path: Path, case: str, free: str, requested: str) -> None:
    verdict = _verdict(tmp_path, case)
    assert (verdict["cause"], verdict["rule"]) == ("process_cap", "room_refused")
    assert verdict["evidence"].startswith(f"the device had {free} free for a {requested} request")


def test_an_old_context_is_the_process_own_memory(tmp_path: Path) -> None:
    """oom/065 (PyTorch 1.12 era, a T4 notebook): 14.76 GiB total, 945.75 MiB free, 12.57 GiB reserved: 1.27 GiB
    outside PyTorch's counters, a context from before lazy loading, not a neighbour."""
    verdict = _verdict(tmp_path, "oom/065_")
    assert verdict["cause"] == "capacity" and verdict["other_bytes"] in (None, 0)


def test_memory_beyond_any_context_is_a_neighbour(tmp_path: Path) -> None:
    """pasted_text/014: a 4 GiB card with 1.07 GiB reserved and 102.40 KiB free: 2.93 GiB in use outside PyTorch's
    counters, more than any context; the message names no process."""
    verdict = _verdict(tmp_path, "pasted_text/014_")
    assert verdict["cause"] == "external_pressure"
    assert verdict["other_bytes"] == pytest.approx(2.93 * 2**30 - 1.5 * 2**30, rel=0.01)


def test_a_neighbour_no_message_names_is_advised_without_a_pid(tmp_path: Path) -> None:
    """The same case: the finding and the incident's first step name the memory, never an empty pid or 0 B."""
    db = _ingested(tmp_path, "pasted_text/014_")
    (finding,) = [f for f in api.findings(db) if f.kind == "external_pressure"]
    assert "processes the OOM messages do not name held 1.43 GiB" in finding.evidence
    assert "pid" not in finding.advice and "nvidia-smi lists its processes" in finding.advice
    step = api.incident_report(db).doc["next_steps"][0]
    assert step.startswith("Move the processes holding 1.43 GiB off") and "0 B" not in step
