"""A memory snapshot at an OOM: allocation history recorded with a bounded ring, dumped at most once per
interval, gzip'd under a size limit, and named so that `oomlab ingest` labels it with its instance."""

from __future__ import annotations

import contextlib
import gzip
import os
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .memory import MemoryApi
from .writer import ReportOnce, utc_stamp


@dataclass(frozen=True)
class SnapshotPolicy:
    """How snapshots are taken. `max_entries` bounds the history ring (PyTorch keeps several KB per entry
    in memory); `min_interval_s` is the least time between two dumps; a dump over `max_bytes` (compressed)
    is abandoned; the newest `keep` snapshot files of an instance are kept. `directory` defaults to the
    capture's own."""

    max_entries: int = 20_000
    stacks: str = "python"
    min_interval_s: float = 600.0
    max_bytes: int = 256 << 20
    keep: int = 8
    directory: str | Path | None = None


class SnapshotTooLarge(Exception):
    """The compressed snapshot passed the policy's max_bytes."""


class _BoundedFile:
    """A write-only file that refuses to grow past `limit` bytes."""

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        self._raw = raw
        self._limit = limit
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self._limit:
            raise SnapshotTooLarge(f"over {self._limit} bytes")
        return self._raw.write(data)

    def flush(self) -> None:
        self._raw.flush()


class OomSnapshots:
    """Dumps `<directory>/<stem>.<utc time>.pickle.gz` when an OOM happens, within the policy's limits."""

    def __init__(
        self,
        api: MemoryApi,
        directory: Path,
        stem: str,
        policy: SnapshotPolicy,
        report: ReportOnce,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self.stem = stem
        self.policy = policy
        self.last_path: Path | None = None
        self._api = api
        self._report = report
        self._clock = clock
        self._last_attempt: float | None = None
        self._busy = threading.Lock()

    def start(self) -> bool:
        """Turn on the allocator's history with the policy's bounds; False where PyTorch cannot."""
        try:
            return self._api.record_history(self.policy.max_entries, self.policy.stacks)
        except Exception as exc:  # a capture without snapshots is still a capture
            self._report("history", f"oomlab capture: cannot record memory history ({exc}); no snapshots")
            return False

    def on_oom(self, *_: object) -> Path | None:
        """Dump a snapshot unless one was tried within min_interval_s or one is being written; never raises."""
        if not self._busy.acquire(blocking=False):
            return None
        try:
            now = self._clock()
            if self._last_attempt is not None and now - self._last_attempt < self.policy.min_interval_s:
                return None
            self._last_attempt = now
            return self._dump()
        finally:
            self._busy.release()

    def _dump(self) -> Path | None:
        name = f"{self.stem}.{utc_stamp(time.time_ns())}.pickle.gz"
        part = self.directory / f".{name}.part"  # a dot file: `oomlab ingest` of the folder skips it
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._write(self._api.snapshot(), part)
            os.replace(part, self.directory / name)
        except Exception as exc:  # an OOM handler must not fail; what went wrong is reported once per kind
            self._abandon(part, exc)
            return None
        self.last_path = self.directory / name
        self._prune()
        return self.last_path

    def _write(self, data: object, part: Path) -> None:
        with open(part, "wb") as raw:
            bounded = _BoundedFile(raw, self.policy.max_bytes)
            # mtime=0: the same state gives the same bytes (ingest skips a file it has seen by its content hash)
            with gzip.GzipFile(fileobj=bounded, mode="wb", compresslevel=3, mtime=0) as packed:  # type: ignore
                pickle.dump(data, packed, protocol=4)

    def _abandon(self, part: Path, exc: Exception) -> None:
        with contextlib.suppress(OSError):
            part.unlink(missing_ok=True)
        if isinstance(exc, SnapshotTooLarge):
            self._report(
                "snapshot-size", f"oomlab capture: OOM snapshot abandoned, {exc} (lower max_entries or raise max_bytes)"
            )
        elif isinstance(exc, OSError):
            self._report(
                "snapshot-disk",
                f"oomlab capture: cannot write an OOM snapshot in {self.directory}: {exc.strerror or exc}",
            )
        else:
            self._report("snapshot", f"oomlab capture: OOM snapshot failed: {exc!r}")

    def _prune(self) -> None:
        """Keep the newest `keep` snapshots of this stem (names sort by time)."""
        files = sorted(self.directory.glob(f"{self.stem}.*.pickle.gz"))
        for path in files[: max(0, len(files) - self.policy.keep)]:
            with contextlib.suppress(OSError):  # another process's pruning got there first
                path.unlink()
