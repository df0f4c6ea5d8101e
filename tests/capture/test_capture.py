"""Capture: one canonical line per request, the decorator, OOM numbers and re-raise, and real H200 requests
replayed through a fake allocator and read back by `oomlab ingest`."""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
import uuid
from pathlib import Path

import duckdb
import pytest

from oomlab import api
from oomlab.capture import Capture, FakeMemory, FakeOutOfMemoryError
from oomlab.capture.memory import OomWatch
from oomlab.config import IngestOptions
from oomlab.fields import FIELD_NAMES

from conftest import H200, read_jsonl_gz

MIXED = H200 / "serve_mixed"
MIB = 1 << 20
GIB = 1 << 30


def real_oom_messages() -> dict[str, str]:
    """The verbatim OOM messages of the serve_mixed capture (PyTorch 2.11 on an H200), by request id."""
    with gzip.open(MIXED / "oom_messages.txt.gz", "rt", encoding="utf-8") as handle:
        blocks = handle.read().split("--- ")[1:]
    return {block.split(" ", 1)[0]: block.split("\n", 1)[1].rstrip("\n") for block in blocks}


def mixed_rows() -> list[dict]:
    return read_jsonl_gz(MIXED / "requests.jsonl.gz")


def first_oom_and_one_before() -> tuple[dict, dict]:
    rows = mixed_rows()
    at = next(i for i, row in enumerate(rows) if row["status"] == "oom")
    return rows[at - 1], rows[at]


def replay(cap: Capture, fake: FakeMemory, row: dict, message: str | None = None) -> None:
    """One logged request's memory story through the fake: its before-state, its peak, at an OOM the state
    the H200 log recorded and the real message, then unwinding to its after-state."""
    fake.set(allocated=row["allocated_before"], reserved=row["reserved_before"], free=row["device_free_after"])
    with cap.request(row["request_id"], row["batch_size"], row["input_sequence_length"], row["output_sequence_length"]):
        fake.set(allocated=row["peak_allocated"])
        try:
            if message is not None:
                fake.set(
                    allocated=row["allocator_allocated"], reserved=row["reserved_memory"], free=row["available_memory"]
                )
                fake.out_of_memory(row["requested_size"], message)
        finally:  # the exception leaving the handler frees the request's tensors
            fake.set(allocated=row["allocated_after"], reserved=row["reserved_after"])


def written_lines(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]


def ingest(paths: list[Path], db: Path) -> duckdb.DuckDBPyConnection:
    report = api.ingest(db, [str(p) for p in paths], IngestOptions())
    assert [r.status for r in report.failed] == []
    return duckdb.connect(str(db), read_only=True)


@pytest.fixture
def fake() -> FakeMemory:
    return FakeMemory(device=0, total=150109880320)  # the H200's total_memory from meta.json


@pytest.fixture
def capture(tmp_path: Path, fake: FakeMemory):
    cap = Capture(tmp_path / "logs", instance="gpu-b-1", model_version="llama-mini-v3", memory=fake)
    yield cap
    cap.close()


def test_a_request_is_one_line_of_canonical_fields(capture: Capture, fake: FakeMemory, tmp_path: Path):
    fake.set(allocated=346065920, reserved=778043392)
    with capture.request("r1", batch_size=1, input_sequence_length=100) as req:
        fake.set(allocated=385437696, reserved=784334848)
        fake.set(allocated=379620352)
        req.output_sequence_length = 8
    capture.flush()
    [line] = written_lines(tmp_path / "logs")
    assert set(line) <= set(FIELD_NAMES)
    assert line["ts"].endswith("Z") and line["status"] == "ok" and line["latency_ms"] >= 0
    assert (line["instance"], line["gpu_index"], line["model_version"], line["request_id"]) == (
        "gpu-b-1",
        0,
        "llama-mini-v3",
        "r1",
    )
    assert (line["batch_size"], line["input_sequence_length"], line["output_sequence_length"]) == (1, 100, 8)
    assert (line["allocated_before"], line["reserved_before"]) == (346065920, 778043392)
    assert (line["allocated_after"], line["reserved_after"], line["peak_allocated"]) == (
        379620352,
        784334848,
        385437696,
    )
    assert line["device_total"] == 150109880320


def test_the_peak_is_the_requests_own(capture: Capture, fake: FakeMemory, tmp_path: Path):
    with capture.request("big"):
        fake.set(allocated=5 * GIB)
        fake.set(allocated=GIB)
    with capture.request("small"):
        fake.set(allocated=2 * GIB)
    capture.flush()
    assert [line["peak_allocated"] for line in written_lines(tmp_path / "logs")] == [5 * GIB, 2 * GIB]


def test_real_requests_replayed_are_ingested_like_the_h200_log(capture: Capture, fake: FakeMemory, tmp_path: Path):
    ok, oom = first_oom_and_one_before()
    message = real_oom_messages()[oom["request_id"]]
    assert message == oom["error"] and message.startswith("CUDA out of memory. Tried to allocate 398.00 MiB.")
    replay(capture, fake, ok)
    with pytest.raises(FakeOutOfMemoryError) as raised:
        replay(capture, fake, oom, message)
    assert str(raised.value) == message
    capture.close()

    con = ingest([tmp_path / "logs"], tmp_path / "capture.duckdb")
    columns = [
        "instance",
        "model_version",
        "request_id",
        "status",
        "batch_size",
        "input_sequence_length",
        "output_sequence_length",
        "allocated_before",
        "reserved_before",
        "allocated_after",
        "reserved_after",
        "peak_allocated",
        "device_total",
        "requested_size",
        "available_memory",
        "allocator_allocated",
        "reserved_memory",
        "error",
    ]
    got = con.execute(f"SELECT {', '.join(columns)} FROM requests ORDER BY line").fetchall()
    assert got == [tuple(row.get(c) for c in columns) for row in (ok, oom)]
    assert con.execute("SELECT count(*) FROM rejects").fetchall() == [(0,)]


def test_the_oom_event_equals_the_one_from_the_real_log(capture: Capture, fake: FakeMemory, tmp_path: Path):
    _, oom = first_oom_and_one_before()
    with pytest.raises(FakeOutOfMemoryError):
        replay(capture, fake, oom, real_oom_messages()[oom["request_id"]])
    capture.close()
    real = tmp_path / "real" / "gpu-b-1.jsonl"
    real.parent.mkdir()
    real.write_text(json.dumps(oom) + "\n")

    columns = (
        "instance, gpu_index, model_version, framework, origin, requested_bytes, total_capacity_bytes, "
        "free_bytes, reserved_bytes, allocated_by_pytorch_bytes, reserved_unallocated_bytes, "
        "process_in_use_bytes, other_processes, batch_size, input_sequence_length, "
        "output_sequence_length, message, request_id"
    )
    events = []
    for folder in (tmp_path / "logs", real.parent):
        with ingest([folder], tmp_path / f"{folder.name}.duckdb") as con:
            events.append(con.execute(f"SELECT {columns} FROM oom_events").fetchall())
    assert events[0] == events[1]
    [event] = events[0]
    assert event[5] == 417333248 and event[7] == 295239680  # the observer's exact bytes, as the H200 logged
    assert [p["pid"] for p in event[12]] == [1030]  # parsed from the verbatim message: the neighbour process


def test_without_an_observer_the_oom_numbers_come_from_the_message(tmp_path: Path):
    fake = FakeMemory(observer=False)
    _, oom = first_oom_and_one_before()
    with Capture(tmp_path, instance="gpu-b-1", memory=fake) as cap, pytest.raises(FakeOutOfMemoryError):
        replay(cap, fake, oom, real_oom_messages()[oom["request_id"]])
    [line] = written_lines(tmp_path)
    assert line["requested_size"] == oom["requested_size"]  # "Tried to allocate 398.00 MiB" is exact
    assert abs(line["available_memory"] - oom["available_memory"]) <= 0.005 * MIB  # "281.56 MiB is free"
    assert abs(line["allocator_allocated"] - 3.13 * GIB) <= 0.005 * GIB  # "3.13 GiB is allocated by PyTorch"
    assert abs(line["reserved_memory"] - (3.13 * GIB + 405.08 * MIB)) <= 0.006 * GIB


def test_other_errors_are_logged_and_reraised(capture: Capture, tmp_path: Path):
    with pytest.raises(ValueError, match="bad prompt"), capture.request("e1"):
        raise ValueError("bad prompt")
    with capture.request("t1") as req:
        req.status = "timeout"
    capture.flush()
    errored, timed_out = written_lines(tmp_path / "logs")
    assert (errored["status"], errored["error"]) == ("error", "ValueError: bad prompt")
    assert "requested_size" not in errored
    assert (timed_out["status"], "error" in timed_out) == ("timeout", False)


def test_extra_fields_are_kept_but_never_shadow_canonical_ones(capture: Capture, tmp_path: Path, caplog):
    with capture.request("x1", queue_ms=12.5, status="ok?"):
        pass
    capture.flush()
    [line] = written_lines(tmp_path / "logs")
    assert line["queue_ms"] == 12.5 and line["status"] == "ok"
    assert "'status' is a canonical field" in caplog.text


def test_the_decorator_reads_fields_from_the_handlers_arguments(capture: Capture, tmp_path: Path):
    @capture.handler
    def generate(prompt, batch_size, input_sequence_length, output_sequence_length=16, *, request_id=None):
        """Docstring kept."""
        return prompt.upper()

    class Server:
        @capture.handler
        def handle(self, request_id, batch_size):
            return batch_size * 2

    @capture.handler(fields=lambda body: {"request_id": body["id"], "batch_size": len(body["prompts"])})
    async def serve(body):
        await asyncio.sleep(0)
        return len(body["prompts"])

    assert generate("hi", 4, 512, request_id="a") == "HI"
    assert generate(prompt="p", batch_size=2, input_sequence_length=8, output_sequence_length=1, request_id="b") == "P"
    assert Server().handle("c", 3) == 6
    assert asyncio.run(serve({"id": "d", "prompts": ["x", "y"]})) == 2
    assert generate.__doc__ == "Docstring kept."
    capture.flush()
    got = [
        (
            line["request_id"],
            line.get("batch_size"),
            line.get("input_sequence_length"),
            line.get("output_sequence_length"),
        )
        for line in written_lines(tmp_path / "logs")
    ]
    assert got == [("a", 4, 512, 16), ("b", 2, 8, 1), ("c", 3, None, None), ("d", 2, None, None)]


def test_the_decorator_reraises_an_oom(capture: Capture, fake: FakeMemory, tmp_path: Path):
    @capture.handler
    def generate(batch_size):
        fake.out_of_memory(2 * GIB, "CUDA out of memory. Tried to allocate 2.00 GiB.")

    with pytest.raises(FakeOutOfMemoryError):
        generate(8)
    capture.flush()
    [line] = written_lines(tmp_path / "logs")
    assert (line["status"], line["batch_size"], line["requested_size"]) == ("oom", 8, 2 * GIB)


def test_without_cuda_it_logs_status_and_latency_and_ingest_reads_it(tmp_path: Path):
    with Capture(tmp_path / "logs", instance="cpu-1", memory=None) as cap:
        with cap.request("n1"):
            pass
        with pytest.raises(KeyError), cap.request("n2"):
            raise KeyError("k")
    first, second = written_lines(tmp_path / "logs")
    assert set(first) == {"ts", "instance", "gpu_index", "model_version", "request_id", "status", "latency_ms"}
    assert (first["status"], second["status"], second["error"]) == ("ok", "error", "KeyError: 'k'")
    with ingest([tmp_path / "logs"], tmp_path / "db.duckdb") as con:
        rows = con.execute(
            "SELECT instance, request_id, status, latency_ms >= 0, allocated_after FROM requests ORDER BY line"
        ).fetchall()
    assert rows == [("cpu-1", "n1", "ok", True, None), ("cpu-1", "n2", "error", True, None)]


def test_it_imports_and_runs_without_torch(tmp_path: Path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with Capture(tmp_path, instance="no-torch") as cap:
        assert cap.memory is None
        with cap.request("q"):
            pass
    assert [line["status"] for line in written_lines(tmp_path)] == ["ok"]


def test_the_observer_never_raises_into_the_allocator():
    class Broken(FakeMemory):
        def counters(self):
            raise RuntimeError("stats unavailable")

    watch = OomWatch(Broken(), device=0)
    watch.listeners.append(lambda facts: 1 / 0)
    watch(0, 4096, 8192, 100)  # must not raise
    facts = watch.take(since_ns=0)
    assert (facts.requested, facts.free, facts.allocated) == (4096, 100, None)
    assert watch.take(since_ns=0) is None  # taken once
    watch(1, 4096, 8192, 100)  # another GPU's OOM is not this capture's
    assert watch.take(since_ns=0) is None


def test_any_value_a_caller_passes_makes_valid_json_or_no_line(capture: Capture, tmp_path: Path, caplog):
    class Int64:  # numpy's and torch's integers convert through __index__
        def __index__(self) -> int:
            return 4

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no str")

    with capture.request(uuid.UUID(int=7), batch_size=Int64(), score=float("nan"), note="naïve"):
        pass
    with capture.request(Unprintable()):
        pass
    capture.flush()
    [line] = written_lines(tmp_path / "logs")
    assert (line["request_id"], line["batch_size"], line["score"], line["note"]) == (
        "00000000-0000-0000-0000-000000000007",
        4,
        None,
        "naïve",
    )
    assert "cannot log a request: RuntimeError('no str')" in caplog.text
