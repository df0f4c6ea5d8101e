"""PyTorch 2.1+ CUDA out-of-memory messages, worded and spaced exactly as the real H200 captures."""

from __future__ import annotations

HINT = (
    "If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    "to avoid fragmentation.  See documentation for Memory Management  "
    "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)"
)


def format_size(size: int) -> str:
    """c10's format_size: bytes up to 1 KiB, then KiB, MiB, GiB with two decimals (binary units)."""
    if size <= 1024:
        return f"{size} bytes"
    for limit, unit, div in ((1 << 20, "KiB", 1 << 10), (1 << 30, "MiB", 1 << 20)):
        if size <= limit:
            return f"{size / div:.2f} {unit}"
    return f"{size / (1 << 30):.2f} GiB"


def oom_message(
    requested: int,
    total: int,
    free: int,
    process_in_use: int,
    allocated: int,
    unallocated: int,
    other: tuple[int, int] | None = None,
    other_first: bool = False,
    gpu: int = 0,
) -> str:
    """The message; `other` is (pid, bytes) of another process on the GPU. PyTorch walks NVML's process
    list (in pid order here): the older process's line comes first, as in serve_mixed."""
    own = [f"Including non-PyTorch memory, this process has {format_size(process_in_use)} memory in use."]
    others = [] if other is None else [f"Process {other[0]} has {format_size(other[1])} memory in use."]
    parts = [
        f"CUDA out of memory. Tried to allocate {format_size(requested)}.",
        f"GPU {gpu} has a total capacity of {format_size(total)} of which {format_size(free)} is free.",
        *(others + own if other_first else own + others),
    ]
    parts.append(
        f"Of the allocated memory {format_size(allocated)} is allocated by PyTorch, and "
        f"{format_size(unallocated)} is reserved by PyTorch but unallocated."
    )
    return " ".join(parts) + " " + HINT
