"""Facts about a file gathered in one pass beside DuckDB's work: content hash and line structure."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from .compression import DECOMPRESSION_ERRORS, compression_of, open_binary

# The content identity of a source (sources.content_hash): "are these the same bytes as a file ingested
# before", on one's own files. xxh3-128 hashes at memory speed (0.04 s per GiB here, sha256 0.69 s: the floor
# a text-log ingest could not go under); 128 bits make an accidental collision as unlikely as sha256's. It is
# not cryptographic: a file crafted to collide with another would be skipped as "already ingested as X",
# which the ingest summary says.
HASH_ALGORITHM = "xxh3-128"

_CHUNK = 32 << 20  # pieces read at a time: few calls, and resident memory stays at one piece
_COUNT_PIECE = 1 << 20  # newlines are counted in pieces that stay in the CPU cache


@dataclass(frozen=True, slots=True)
class FileFacts:
    """The content hash (HASH_ALGORITHM) of the bytes on disk; lines of the decompressed text (-1 when not
    counted)."""

    content_hash: str
    lines: int


def content_hash_of(path: str | Path) -> str:
    """The HASH_ALGORITHM digest (hex) of a file's bytes as stored: what tells ingest it has seen a file's
    content before (the schema's `sources.content_hash`). xxhash releases the GIL while it hashes, so this runs
    beside DuckDB's threads or a text scan."""
    digest = xxhash.xxh3_128()
    _each_piece(path, digest.update)
    return digest.hexdigest()


def hash_of(path: str | Path, algorithm: str) -> str:
    """The digest of a file under `algorithm`: HASH_ALGORITHM, or `sha256`, which databases written before
    hold (sources.hash_algorithm), so that their files are still recognised."""
    if algorithm == HASH_ALGORITHM:
        return content_hash_of(path)
    digest = hashlib.new(algorithm)
    _each_piece(path, digest.update)
    return digest.hexdigest()


def _each_piece(path: str | Path, consume: Callable[[memoryview | bytes], object]) -> None:
    """Hand the file's bytes as stored to `consume` in pieces, read into one reused buffer. Not a memory map:
    a log truncated while mapped (logrotate's copytruncate) kills the process with SIGBUS, where a read just
    returns less (and ingest then sees that the file changed)."""
    buffer = bytearray(_CHUNK)
    with open(path, "rb", buffering=0) as handle, memoryview(buffer) as view:
        while got := handle.readinto(buffer):
            with view[:got] as piece:
                consume(piece)


def count_newlines(buf: Any, start: int, end: int) -> int:
    """The number of b"\\n" in buf[start:end] of any buffer (numpy compares and counts at memory speed;
    bytes.count does not)."""
    import numpy as np  # here: request logs that are not counted never load numpy

    total = 0
    for piece in range(start, end, _COUNT_PIECE):
        upto = min(piece + _COUNT_PIECE, end)
        total += int(np.count_nonzero(np.frombuffer(buf, np.uint8, count=upto - piece, offset=piece) == 10))
    return total


class _LineCounter:
    """Counts lines across chunks; a last line without its newline counts too."""

    def __init__(self) -> None:
        self.lines = 0
        self._last = 10  # b"\n"

    def feed(self, chunk: memoryview | bytes) -> None:
        """Count the newlines of one chunk."""
        self.lines += count_newlines(chunk, 0, len(chunk))
        if len(chunk):
            self._last = chunk[-1]

    def finish(self) -> None:
        if self._last != 10:
            self.lines += 1


def file_facts(path: str | Path, count_lines: bool = True) -> FileFacts:
    """Hash and line facts in one pass (two when the file is compressed); lines are counted only when
    asked, since counting holds the GIL that a text scan beside it needs."""
    if not count_lines:
        return FileFacts(content_hash_of(path), -1)
    if compression_of(path) is not None:
        return FileFacts(content_hash_of(path), line_count(path))
    counter = _LineCounter()
    digest = xxhash.xxh3_128()

    def both(piece: memoryview | bytes) -> None:
        digest.update(piece)
        counter.feed(piece)

    _each_piece(path, both)
    counter.finish()
    return FileFacts(digest.hexdigest(), counter.lines)


def line_count(path: str | Path) -> int:
    """The lines of the decompressed file (a last line without its newline counts too); -1 (not counted) when
    the compressed stream is cut short: the reader that loads it says where."""
    counter = _LineCounter()
    with open_binary(path) as handle:
        try:
            while chunk := handle.read(_CHUNK):
                counter.feed(chunk)
        except (EOFError, *DECOMPRESSION_ERRORS):
            return -1
    counter.finish()
    return counter.lines


def facts_in_background(path: str | Path, count_lines: bool | Callable[[], bool] = True) -> Future[FileFacts]:
    """file_facts in a thread; errors surface when the result is asked for. `count_lines` may be a function,
    called in the thread, that decides (from the file's kind, say)."""
    future: Future[FileFacts] = Future()

    def run() -> None:
        try:
            count = count_lines() if callable(count_lines) else count_lines
            future.set_result(file_facts(path, count))
        except Exception as exc:  # any failure goes to the caller through the future
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True, name="oomlab-facts").start()
    return future
