"""JSON Lines files that rotate by size, written by a background thread so a request never waits on a disk,
and that never raise: a failing disk is reported once and its lines are dropped."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

LOG = logging.getLogger("oomlab.capture")

Opener = Callable[[Path], BinaryIO]


def _open_append(path: Path) -> BinaryIO:
    return open(path, "ab")  # kept open across flushes


def utc_stamp(ns: int) -> str:
    """`20261130T015003.302123Z`: a UTC time that sorts as text and has no characters a file name dislikes."""
    seconds, micros = divmod(ns // 1000, 1_000_000)
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(seconds)) + f".{micros:06d}Z"


class ReportOnce:
    """Logs each kind of problem once per episode: a service that failed loudly per request would drown."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, key: str, message: str) -> None:
        if key not in self._seen:
            self._seen.add(key)
            LOG.warning(message)

    def resolved(self, key: str, message: str) -> None:
        """Say that a reported problem went away, so a later one is reported again."""
        if key in self._seen:
            self._seen.discard(key)
            LOG.warning(message)


_writers: weakref.WeakSet[RotatingWriter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for writer in list(_writers):
        writer.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class RotatingWriter:
    """Appends lines to `<directory>/<stem>.<utc start>.<pid>.jsonl`, starting a new file past `max_bytes`
    and deleting the oldest of `<stem>.*.jsonl` beyond `max_files` (None keeps them all)."""

    def __init__(
        self,
        directory: str | Path,
        stem: str,
        *,
        max_bytes: int = 16 << 20,
        max_files: int | None = 64,
        flush_interval_s: float = 1.0,
        max_pending: int = 100_000,
        opener: Opener = _open_append,
        report: ReportOnce | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.stem = stem
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.flush_interval_s = flush_interval_s
        self.max_pending = max_pending
        self.path: Path | None = None
        self.written = 0
        self.dropped = 0
        self._opener = opener
        self._report = report or ReportOnce()
        self._pending: deque[str] = deque()  # append and popleft are thread-safe without a lock
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._file: BinaryIO | None = None
        self._size = 0
        self._thread: threading.Thread | None = None
        self._closed = False
        _writers.add(self)

    def write(self, line: str, urgent: bool = False) -> None:
        """Queue one line (ending in a newline); `urgent` has the background thread write it at once."""
        if len(self._pending) >= self.max_pending:
            self.dropped += 1
            self._report(
                "backlog",
                f"oomlab capture: {self.max_pending} lines wait for {self.directory}; "
                "new lines are dropped until the disk catches up",
            )
            return
        self._pending.append(line)
        if self._thread is None:
            self._start()
        if urgent:
            self._wake.set()

    def flush(self) -> None:
        """Write every queued line now, in the caller's thread."""
        with self._lock:
            lines = []
            pending = self._pending
            while pending:
                lines.append(pending.popleft())
            if lines:
                self._write(lines)

    def close(self) -> None:
        """Write what is queued, stop the thread and close the file."""
        self._closed = True
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self.flush()
        with self._lock:
            self._close_file()

    def after_fork(self) -> None:
        """In a forked child: the parent's thread does not exist here, and its lines and file are the parent's."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = None
        self._pending.clear()
        self._close_file()  # the child's copy of the descriptor; the parent's file stays open in the parent
        self.path, self._size = None, 0

    def _start(self) -> None:
        thread = threading.Thread(target=self._run, name="oomlab-capture-writer", daemon=True)
        self._thread = thread
        thread.start()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            try:
                self.flush()
            except Exception as exc:  # the thread must outlive any surprise, or lines pile up unwritten
                self._report("thread", f"oomlab capture: writer error {exc!r}; continuing")

    def _write(self, lines: list[str]) -> None:
        """Write lines, starting a new file wherever the current one would pass max_bytes."""
        chunk: list[str] = []
        size = 0
        for line in lines:
            n = len(line)  # lines are ASCII (JSON with ensure_ascii): characters are bytes
            if chunk and self._size + size + n > self.max_bytes:
                self._write_chunk(chunk, size)
                chunk, size = [], 0
            chunk.append(line)
            size += n
        self._write_chunk(chunk, size)

    def _write_chunk(self, chunk: list[str], size: int) -> None:
        try:
            file = self._file
            if file is None or (self._size > 0 and self._size + size > self.max_bytes):
                file = self._rotate()
            file.write("".join(chunk).encode("ascii", "backslashreplace"))
            file.flush()
        except OSError as exc:
            self._failed(exc, len(chunk))
            return
        self._size += size
        self.written += len(chunk)
        self._report.resolved(
            "disk", f"oomlab capture: writing to {self.path} again ({self.dropped} lines were dropped)"
        )

    def _failed(self, exc: OSError, lines: int) -> None:
        """Drop the lines and report the first failure; the next flush starts a new file."""
        self.dropped += lines
        self._report(
            "disk",
            f"oomlab capture: cannot write {self.path or self.directory}: "
            f"{exc.strerror or exc}; request lines are dropped until it can",
        )
        self._close_file()  # a half-written line stays at the end of that file; ingest rejects just it

    def _rotate(self) -> BinaryIO:
        """Close the current file and open a new one named by the time now."""
        self._close_file()
        self.directory.mkdir(parents=True, exist_ok=True)
        ns = time.time_ns()
        self.path = self._name(ns)
        while self.path.exists():  # two rotations within a microsecond: the next microsecond's name
            ns += 1000
            self.path = self._name(ns)
        self._file = file = self._opener(self.path)
        self._size = 0
        self._prune()
        return file

    def _name(self, ns: int) -> Path:
        return self.directory / f"{self.stem}.{utc_stamp(ns)}.{os.getpid()}.jsonl"

    def _close_file(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            # A failing close lost its last bytes; the write that failed has said so already.
            with contextlib.suppress(OSError):
                file.close()

    def _prune(self) -> None:
        """Delete the oldest of this stem's files beyond max_files (names sort by their start time)."""
        if self.max_files is None:
            return
        old = sorted(p for p in self.directory.glob(f"{self.stem}.*.jsonl") if p != self.path)
        for path in old[: max(0, len(old) - (self.max_files - 1))]:
            try:
                path.unlink()
            except OSError as exc:
                self._report("prune", f"oomlab capture: cannot delete old {path}: {exc.strerror or exc}")
