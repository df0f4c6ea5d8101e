"""Per-request overhead of `oomlab.capture` against a bare call of the same handler (no snapshots).

Modes: the context manager and the decorator over a fake allocator (the counters are free, so this is
capture's own cost: two counter reads, the peak reset, the line, the queue), and the context manager with
no CUDA (status and latency only). Lines go to a temporary folder through the writer thread; the final
flush is inside the timed run, so writing is paid for. The target is under 50 us per request.

    python bench/capture.py [--requests 100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from oomlab.capture import Capture, FakeMemory

TARGET_US = 50.0


def handler(batch_size: int, input_sequence_length: int, output_sequence_length: int) -> int:
    return batch_size * (input_sequence_length + output_sequence_length)


def bare(n: int, _: Path) -> None:
    for i in range(n):
        handler(8, i, 16)


def context_manager(memory: FakeMemory | None) -> Callable[[int, Path], None]:
    def run(n: int, folder: Path) -> None:
        with Capture(folder, instance="bench", model_version="m", memory=memory) as cap:
            for i in range(n):
                with cap.request(i, batch_size=8, input_sequence_length=i, output_sequence_length=16):
                    handler(8, i, 16)

    return run


def decorator(n: int, folder: Path) -> None:
    with Capture(folder, instance="bench", model_version="m", memory=FakeMemory()) as cap:
        wrapped = cap.handler(handler)
        for i in range(n):
            wrapped(8, i, 16)


def best_us(run: Callable[[int, Path], None], n: int, runs: int) -> float:
    """The fastest of `runs` timings, in microseconds per request (machines are noisy)."""
    best = float("inf")
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            run(n, Path(folder))
            best = min(best, time.perf_counter() - start)
    return best / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    base = best_us(bare, args.requests, args.runs)
    print(f"bare call                          {base:8.3f} us/request")
    for name, run in (
        ("context manager, fake allocator", context_manager(FakeMemory())),
        ("decorator, fake allocator", decorator),
        ("context manager, no CUDA", context_manager(None)),
    ):
        us = best_us(run, args.requests, args.runs)
        overhead = us - base
        print(
            f"{name:34} {us:8.3f} us/request  overhead {overhead:7.3f} us  "
            f"ratio to bare {us / base:6.1f}x  overhead/target {overhead / TARGET_US:5.3f}"
        )


if __name__ == "__main__":
    main()
