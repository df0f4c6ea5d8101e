"""Progress of one ingest, for a progress bar: the bytes in all, each file's start and end, and within a file
how far DuckDB's running statement (or a loader that reads the file itself) has got."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

import duckdb


class Progress(Protocol):
    """Receives progress: the total bytes once (it answers whether it wants the rest), then per file its
    start, `fraction` done, and its end."""

    def begin(self, total_bytes: int) -> bool: ...
    def start(self, path: str, size: int) -> None: ...
    def update(self, fraction: float) -> None: ...
    def finish(self) -> None: ...


class ReadPosition:
    """How far a loader that reads its file itself has got (0-1), for the progress bar: DuckDB reports its own
    progress on the files it reads. The loader writes it, the polling thread reads it."""

    __slots__ = ("fraction",)

    def __init__(self) -> None:
        self.fraction = 0.0


@contextmanager
def polling(
    con: duckdb.DuckDBPyConnection, progress: Progress, position: ReadPosition, every: float = 0.25
) -> Iterator[None]:
    """Report progress from a thread: DuckDB's on its running statement (query_progress is thread-safe, and
    -1 when none runs), or how far the loader has read the file itself."""
    done = threading.Event()

    def poll() -> None:
        while not done.wait(every):
            fraction = max(con.query_progress() / 100, position.fraction)
            if fraction > 0:
                progress.update(fraction)

    thread = threading.Thread(target=poll, daemon=True, name="oomlab-progress")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
