"""Capture request logs and OOM snapshots inside a running service (extra `oomlab[capture]`).

torch is imported only when a `Capture` looks for CUDA, so this package imports without it.
"""

from .capture import Capture, Request
from .fake import FakeMemory, FakeOutOfMemoryError
from .memory import MemoryApi, OomFacts, TorchCudaMemory
from .snapshot import SnapshotPolicy
from .writer import RotatingWriter

__all__ = [
    "Capture",
    "FakeMemory",
    "FakeOutOfMemoryError",
    "MemoryApi",
    "OomFacts",
    "Request",
    "RotatingWriter",
    "SnapshotPolicy",
    "TorchCudaMemory",
]
