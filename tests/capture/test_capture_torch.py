"""Capture against PyTorch: the torch.cuda backend over the real stats layout, the OOM class that is caught,
and the real signatures of the private APIs it calls (the last two need torch installed)."""

from __future__ import annotations

import gzip
import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from oomlab.capture import Capture, TorchCudaMemory
from oomlab.capture.memory import cuda_memory, torch_oom_errors

from conftest import H200

MIXED = H200 / "serve_mixed"


def nested_stats(flat: dict[str, int]) -> dict:
    """`memory_stats()` keys (`allocated_bytes.all.current`) back into the nested dict they were flattened from."""
    nested: dict = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


class FakeTorch:
    """Just the torch.cuda surface TorchCudaMemory uses, answering with the H200's real stats at its first OOM."""

    def __init__(self, stats: dict[str, int]) -> None:
        self.calls: list[tuple] = []
        self.attached: list = []
        self.cuda = SimpleNamespace(
            OutOfMemoryError=type("OutOfMemoryError", (RuntimeError,), {}),
            memory_stats_as_nested_dict=lambda device: nested_stats(stats),
            reset_peak_memory_stats=lambda device: self.calls.append(("reset_peak", device)),
            get_device_properties=lambda device: SimpleNamespace(total_memory=150109880320),
            mem_get_info=lambda device: (295239680, 150109880320),
            memory=SimpleNamespace(
                _record_memory_history=lambda **kw: self.calls.append(("history", kw)),
                _snapshot=lambda: {"segments": [], "device_traces": [[]]},
            ),
        )
        self._C = SimpleNamespace(_cuda_attach_out_of_memory_observer=self.attached.append)


@pytest.fixture
def h200_stats() -> dict[str, int]:
    with gzip.open(MIXED / "memory_stats_first_oom.json.gz", "rt") as handle:
        return json.load(handle)


def test_the_cuda_backend_reads_allocated_reserved_and_peak_from_one_stats_call(h200_stats):
    torch = FakeTorch(h200_stats)
    memory = TorchCudaMemory(torch, 0)
    assert memory.counters() == (
        h200_stats["allocated_bytes.all.current"],
        h200_stats["reserved_bytes.all.current"],
        h200_stats["allocated_bytes.all.peak"],
    )
    memory.reset_peak()
    assert memory.record_history(20_000, "python")
    assert torch.calls == [
        ("reset_peak", 0),
        ("history", {"enabled": "all", "context": "all", "stacks": "python", "max_entries": 20_000}),
    ]
    assert (memory.device_total(), memory.device_free()) == (150109880320, 295239680)


def test_one_dispatcher_is_attached_and_it_reaches_every_capture(h200_stats, tmp_path: Path):
    torch = FakeTorch(h200_stats)
    first = Capture(tmp_path / "a", instance="a", memory=TorchCudaMemory(torch, 0))
    second = Capture(tmp_path / "b", instance="b", memory=TorchCudaMemory(torch, 1))
    try:
        [dispatch] = torch.attached  # the allocator keeps every observer forever: attach once
        dispatch(1, 1 << 30, 150109880320, 1 << 20)
        assert first._watch.take(0) is None  # device 0's capture ignores device 1's OOM
        facts = second._watch.take(0)
        assert (facts.requested, facts.allocated) == (1 << 30, h200_stats["allocated_bytes.all.current"])
    finally:
        first.close()
        second.close()


def test_an_uninitialised_allocator_reads_as_empty():
    torch = FakeTorch({})
    assert TorchCudaMemory(torch, 0).counters() == (0, 0, 0)


def test_torch_cuda_out_of_memory_error_is_the_oom_caught(tmp_path: Path):
    torch = pytest.importorskip("torch")
    assert torch_oom_errors() == (torch.cuda.OutOfMemoryError,)
    with gzip.open(MIXED / "oom_messages.txt.gz", "rt") as handle:
        message = handle.read().split("\n")[1]
    with Capture(tmp_path, instance="cpu-torch") as cap:
        if not torch.cuda.is_available():
            assert cap.memory is None  # "auto" without CUDA: status and latency only
        with pytest.raises(torch.cuda.OutOfMemoryError) as raised, cap.request("t1", batch_size=16):
            raise torch.cuda.OutOfMemoryError(message)
        with pytest.raises(RuntimeError), cap.request("t2"):
            raise RuntimeError(message)  # the text alone does not make an OOM: only the class does
    oom, other = (json.loads(line) for path in tmp_path.glob("*.jsonl") for line in path.read_text().splitlines())
    assert str(raised.value) == message
    assert (oom["status"], oom["error"], oom["requested_size"]) == ("oom", message, 398 << 20)
    assert (other["status"], "requested_size" in other) == ("error", False)


def test_without_cuda_auto_means_no_memory_backend():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine: the backend is real here")
    assert cuda_memory(None) is None


def test_the_private_torch_apis_take_the_arguments_capture_passes():
    torch = pytest.importorskip("torch")
    record = inspect.signature(torch.cuda.memory._record_memory_history)
    assert {"enabled", "context", "stacks", "max_entries"} <= set(record.parameters)
    for name in ("memory_stats_as_nested_dict", "reset_peak_memory_stats", "mem_get_info", "get_device_properties"):
        assert callable(getattr(torch.cuda, name)), name
    assert callable(torch.cuda.memory._snapshot)
