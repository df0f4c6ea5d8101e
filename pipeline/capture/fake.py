"""A stand-in for torch.cuda's allocator, to test a service's capture (and capture itself) without a GPU."""

from __future__ import annotations

from typing import Any, NoReturn

from .memory import Observer


class FakeOutOfMemoryError(RuntimeError):
    """Raised by `FakeMemory.out_of_memory`, as `torch.cuda.OutOfMemoryError` is by PyTorch."""


class FakeMemory:
    """A `MemoryApi` whose counters the test sets, and whose OOMs happen the way PyTorch's do: the OOM
    observers see the state at the failure first, then the error is raised. `observer=False` is a PyTorch
    without the hook; `history=False` one that cannot record history."""

    oom_errors: tuple[type[BaseException], ...] = (FakeOutOfMemoryError,)

    def __init__(
        self,
        device: int = 0,
        total: int = 80 << 30,
        *,
        observer: bool = True,
        history: bool = True,
        snapshot_data: Any = None,
    ) -> None:
        self.device = device
        self.total = total
        self.allocated = self.reserved = self.peak = 0
        self.free = total
        self.observers: list[Observer] = []
        self.history: tuple[int, str] | None = None  # (max_entries, stacks) once recording
        self.snapshots_taken = 0
        self._has_observer = observer
        self._has_history = history
        self._snapshot_data = snapshot_data

    def set(self, allocated: int | None = None, reserved: int | None = None, free: int | None = None) -> None:
        """Change the counters; the peak follows allocated up, as the allocator's does."""
        if allocated is not None:
            self.allocated = allocated
            self.peak = max(self.peak, allocated)
        if reserved is not None:
            self.reserved = reserved
        if free is not None:
            self.free = free

    def out_of_memory(self, requested: int, message: str) -> NoReturn:
        """Fail an allocation of `requested` bytes with `message`, observers first."""
        for observer in list(self.observers):
            observer(self.device, requested, self.total, self.free)
        raise FakeOutOfMemoryError(message)

    def counters(self) -> tuple[int, int, int]:
        return self.allocated, self.reserved, self.peak

    def reset_peak(self) -> None:
        self.peak = self.allocated

    def device_total(self) -> int | None:
        return self.total

    def device_free(self) -> int | None:
        return self.free

    def attach_oom_observer(self, observer: Observer) -> bool:
        if self._has_observer:
            self.observers.append(observer)
        return self._has_observer

    def detach_oom_observer(self, observer: Observer) -> None:
        if observer in self.observers:
            self.observers.remove(observer)

    def record_history(self, max_entries: int, stacks: str) -> bool:
        if self._has_history:
            self.history = (max_entries, stacks)
        return self._has_history

    def snapshot(self) -> Any:
        self.snapshots_taken += 1
        if self._snapshot_data is not None:
            return self._snapshot_data
        return {"segments": [], "device_traces": [[]]}
