"""What capture reads from a device's allocator: a small protocol, torch.cuda's implementation of it, and
the allocator's OOM observer. torch is imported only when a capture asks for it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

# The allocator calls an OOM observer with (device, requested bytes, device total or per-process cap,
# device free bytes) just before it raises, while everything the failing request holds is still allocated.
Observer = Callable[[int, int, int, int], None]
LOG = logging.getLogger("oomlab.capture")


class MemoryApi(Protocol):
    """A device's allocator counters, as capture needs them; `TorchCudaMemory`, or a fake in tests."""

    oom_errors: tuple[type[BaseException], ...]

    def counters(self) -> tuple[int, int, int]:
        """(allocated, reserved, peak allocated) bytes now."""
        ...

    def reset_peak(self) -> None:
        """Start a new peak-allocated measurement."""
        ...

    def device_total(self) -> int | None:
        """The device's memory in bytes."""
        ...

    def device_free(self) -> int | None:
        """Bytes free on the device now (cudaMemGetInfo)."""
        ...

    def attach_oom_observer(self, observer: Observer) -> bool:
        """Call `observer` at every OOM of this device's allocator; False where there is no such hook."""
        ...

    def detach_oom_observer(self, observer: Observer) -> None:
        """Stop calling `observer`."""
        ...

    def record_history(self, max_entries: int, stacks: str) -> bool:
        """Record allocation history with stacks, keeping the last `max_entries` events; False if unsupported."""
        ...

    def snapshot(self) -> Any:
        """The allocator's state and history, as `torch.cuda.memory._snapshot()` returns it."""
        ...


@dataclass(frozen=True, slots=True)
class OomFacts:
    """What the allocator's OOM observer saw: exact bytes at the failure, before unwinding freed anything."""

    at_ns: int  # time.perf_counter_ns() when the observer ran
    device: int
    requested: int
    limit: int  # the device's total, or the per-process cap when one is set
    free: int
    allocated: int | None
    reserved: int | None


class OomWatch:
    """Keeps the facts of the latest OOM per thread (the failing allocation runs in the request's thread)."""

    def __init__(self, api: MemoryApi, device: int | None) -> None:
        self._api = api
        self._device = device
        self._local = threading.local()
        self.listeners: list[Callable[[OomFacts], None]] = []

    def __call__(self, device: int, alloc: int, limit: int, free: int) -> None:
        """The observer; it must never raise, or PyTorch reports our error instead of the OOM."""
        try:
            if self._device is not None and device != self._device:
                return  # another GPU of this process; its own capture, if any, logs it
            try:
                allocated, reserved, _ = self._api.counters()
            except Exception:  # counters are a bonus here; the observer's own numbers are exact
                allocated = reserved = None
            facts = OomFacts(time.perf_counter_ns(), device, alloc, limit, free, allocated, reserved)
            self._local.facts = facts
            for listener in tuple(self.listeners):
                listener(facts)
        except Exception:  # see the docstring: nothing may escape into the allocator
            pass

    def take(self, since_ns: int) -> OomFacts | None:
        """The facts of this thread's OOM observed since `since_ns` (perf_counter_ns), once."""
        facts: OomFacts | None = getattr(self._local, "facts", None)
        self._local.facts = None
        return facts if facts is not None and facts.at_ns >= since_ns else None


def load_torch() -> Any | None:
    """The torch module, or None when it is not installed (capture then logs status and latency only)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def torch_oom_errors() -> tuple[type[BaseException], ...]:
    """`torch.cuda.OutOfMemoryError` where torch is installed; nothing otherwise."""
    torch = load_torch()
    return (torch.cuda.OutOfMemoryError,) if torch is not None else ()


def cuda_memory(gpu_index: int | None) -> TorchCudaMemory | None:
    """torch.cuda's allocator of `gpu_index` (default: the current device), or None without CUDA."""
    torch = load_torch()
    if torch is None or not torch.cuda.is_available():
        return None
    try:
        torch.cuda.init()  # the stats are empty and older PyTorch attaches observers to no device until then
        return TorchCudaMemory(torch, torch.cuda.current_device() if gpu_index is None else gpu_index)
    except Exception as exc:  # a driver that lists a GPU it cannot open: log without memory, don't fail
        LOG.warning("oomlab capture: CUDA is listed but unusable (%s); logging status and latency only", exc)
        return None


# The allocator keeps every observer it was given for the life of the process: attach one dispatcher once.
_observers: list[Observer] = []
_observers_lock = threading.Lock()
_attached_to: list[Callable[[Observer], None]] = []  # the attach functions the dispatcher was given to


def _dispatch(device: int, alloc: int, limit: int, free: int) -> None:
    for observer in tuple(_observers):
        observer(device, alloc, limit, free)


class TorchCudaMemory:
    """`MemoryApi` over torch.cuda for one device."""

    def __init__(self, torch: Any, device: int) -> None:
        self.device = device
        self.oom_errors = (torch.cuda.OutOfMemoryError,)
        self._torch = torch
        # One call of the nested stats gives allocated, reserved and peak; memory_allocated() and friends
        # each build and flatten the whole stats dict, several times slower.
        self._stats = torch.cuda.memory_stats_as_nested_dict
        self._reset = torch.cuda.reset_peak_memory_stats
        self._total = int(torch.cuda.get_device_properties(device).total_memory)

    def counters(self) -> tuple[int, int, int]:
        stats = self._stats(self.device)
        if not stats:  # the allocator is not initialised yet: nothing allocated
            return 0, 0, 0
        allocated, reserved = stats["allocated_bytes"]["all"], stats["reserved_bytes"]["all"]
        return allocated["current"], reserved["current"], allocated["peak"]

    def reset_peak(self) -> None:
        self._reset(self.device)

    def device_total(self) -> int | None:
        return self._total

    def device_free(self) -> int | None:
        return int(self._torch.cuda.mem_get_info(self.device)[0])

    def attach_oom_observer(self, observer: Observer) -> bool:
        attach = getattr(self._torch._C, "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            return False
        with _observers_lock:
            if attach not in _attached_to:
                attach(_dispatch)
                _attached_to.append(attach)
            _observers.append(observer)
        return True

    def detach_oom_observer(self, observer: Observer) -> None:
        with _observers_lock:
            if observer in _observers:
                _observers.remove(observer)

    def record_history(self, max_entries: int, stacks: str) -> bool:
        record = getattr(self._torch.cuda.memory, "_record_memory_history", None)
        if record is None:
            return False
        record(enabled="all", context="all", stacks=stacks, max_entries=max_entries)
        return True

    def snapshot(self) -> Any:
        return self._torch.cuda.memory._snapshot()
