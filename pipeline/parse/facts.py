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
    """sha256 of the bytes on disk; newline count and blank lines of the decompressed text."""

    sha256: str
    lines: int
    has_blank_lines: bool


def sha256_of(path: str | Path) -> str:
    """The sha256 of a file's bytes as stored."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)  # releases the GIL: runs beside DuckDB's threads
    return digest.hexdigest()


class _LineCounter:
    """Counts lines and notices blank ones across chunk boundaries."""

    def __init__(self) -> None:
        self.lines = 0
        self.blank = False
        self._last = b"\n"  # the start of the file counts as after a newline

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.lines += chunk.count(b"\n")
        if not self.blank:
            joined = self._last + chunk[:1]
            self.blank = b"\n\n" in joined or b"\n\n" in chunk or b"\n\r\n" in self._last + chunk[:2] \
                or b"\n\r\n" in chunk
        self._last = chunk[-1:]

    def finish(self) -> None:
        if self._last != b"\n":
            self.lines += 1  # a last line without its newline


def file_facts(path: str | Path, count_lines: bool = True) -> FileFacts:
    """Hash and line facts in one read (two when the file is compressed); lines are counted only when
    asked, since counting holds the GIL that a text scan beside it needs."""
    counter = _LineCounter()
    if not count_lines:
        return FileFacts(sha256_of(path), -1, False)
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
    return FileFacts(sha, counter.lines, counter.blank)


def facts_in_background(path: str | Path, count_lines: bool = True) -> Future[FileFacts]:
    """file_facts in a thread; errors surface when the result is asked for."""
    future: Future[FileFacts] = Future()

    def run() -> None:
        try:
            future.set_result(file_facts(path, count_lines))
        except Exception as exc:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True, name="oomlab-facts").start()
    return future
