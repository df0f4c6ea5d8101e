"""Facts about a file gathered in one pass beside DuckDB's work: content hash and line structure."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from .compression import compression_of, open_binary

_CHUNK = 8 << 20


@dataclass(frozen=True, slots=True)
class FileFacts:
    """sha256 of the bytes on disk; lines of the decompressed text (-1 when not counted)."""

    sha256: str
    lines: int


def sha256_of(path: str | Path) -> str:
    """The sha256 of a file's bytes as stored."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)  # releases the GIL: runs beside DuckDB's threads
    return digest.hexdigest()


class _LineCounter:
    """Counts lines across chunks; a last line without its newline counts too."""

    def __init__(self) -> None:
        self.lines = 0
        self._last = b"\n"

    def feed(self, chunk: bytes) -> None:
        if chunk:
            self.lines += chunk.count(b"\n")
            self._last = chunk[-1:]

    def finish(self) -> None:
        if self._last != b"\n":
            self.lines += 1


def file_facts(path: str | Path, count_lines: bool = True) -> FileFacts:
    """Hash and line facts in one read (two when the file is compressed); lines are counted only when
    asked, since counting holds the GIL that a text scan beside it needs."""
    counter = _LineCounter()
    if not count_lines:
        return FileFacts(sha256_of(path), -1)
    if compression_of(path) is None:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
                counter.feed(chunk)
        sha = digest.hexdigest()
    else:
        sha = sha256_of(path)
        with open_binary(path) as handle:
            while chunk := handle.read(_CHUNK):
                counter.feed(chunk)
    counter.finish()
    return FileFacts(sha, counter.lines)


def facts_in_background(path: str | Path, count_lines: bool = True) -> Future[FileFacts]:
    """file_facts in a thread; errors surface when the result is asked for."""
    future: Future[FileFacts] = Future()

    def run() -> None:
        try:
            future.set_result(file_facts(path, count_lines))
        except Exception as exc:  # any failure goes to the caller through the future
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True, name="oomlab-facts").start()
    return future
