"""The stream the unpickler reads a snapshot from, bounded by the input: no read larger than what remains, no
text line without end, and no more memory than a pickle of the bytes read so far can need."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from ...errors import InputError
from ..compression import open_binary

try:
    import resource
except ImportError:  # not on Windows: reads are still checked, only the memory guard is off
    resource = None  # type: ignore[assignment]

# The unpickler reads a frame (protocol 4+) or a counted object (BINBYTES8, BINUNICODE8, BYTEARRAY8, LONG4, ...)
# with one read of the length the pickle declares. A read above this size is first checked against what is
# left of the input, so a few bytes declaring 3 GiB cannot make the reader decompress or allocate 3 GiB.
# torch's pickles frame every 64 KiB and a snapshot's strings are short: the check never runs for them.
CHECK_READS_ABOVE = 64 << 20
# Protocol 0-1 opcodes read text up to a newline; a snapshot has no text line near this long.
MAX_LINE = 64 << 20
# Memory the unpickler may take beyond what the process had: unpickling a snapshot holds about 5x its
# pickle's bytes (1.29 GB for big_trace's 250 MB), so 16x the bytes read so far plus 256 MiB (for small
# files, and for what other threads map meanwhile) never stops an honest file. A pickle that claims more
# does so without data behind it: LONG_BINPUT with index 2^28 is 5 bytes and makes the C unpickler zero a
# 4 GiB memo table.
MEMORY_PER_BYTE = 16
MEMORY_HEADROOM = 256 << 20
_RAISE_EVERY = 4 << 20  # input bytes between raises of the limit (one setrlimit call each)
_HINT_CORRUPT = "the file is truncated or not a pickle; copy it again from where it was dumped"


class MemoryGuard:
    """While a pickle loads, caps this process's address space (RLIMIT_AS) at what it had plus what the bytes
    read so far can honestly need (`allow`), so a pickle that claims gigabytes from a few bytes fails with
    MemoryError instead of taking them; the limit is restored on exit. Only on Linux, only one load at a time
    (a second, in another thread, loads unguarded), and never above a limit the user set."""

    _lock = threading.Lock()

    def __init__(self) -> None:
        self.active = False
        self._saved: tuple[int, int] = (0, 0)
        self._base = 0

    def __enter__(self) -> MemoryGuard:
        if resource is None or not sys.platform.startswith("linux") or not self._lock.acquire(blocking=False):
            return self
        try:
            self._saved = resource.getrlimit(resource.RLIMIT_AS)
            self._base = _address_space()
        except (OSError, ValueError):
            self._lock.release()
            return self
        self.active = True
        self.allow(0)
        return self

    def allow(self, input_bytes: int) -> None:
        """Let the process grow to what a pickle of `input_bytes` bytes can need."""
        if not self.active:
            return
        soft, hard = self._saved
        limit = self._base + MEMORY_HEADROOM + MEMORY_PER_BYTE * input_bytes
        if soft != resource.RLIM_INFINITY and limit >= soft:
            return  # the user's own limit is lower: keep it
        if hard != resource.RLIM_INFINITY and limit > hard:
            return
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        except (OSError, ValueError):
            self._release()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._release()

    def _release(self) -> None:
        if self.active:
            self.active = False
            try:
                resource.setrlimit(resource.RLIMIT_AS, self._saved)
            finally:
                self._lock.release()


def _address_space() -> int:
    """This process's mapped address space in bytes (what RLIMIT_AS counts)."""
    with open("/proc/self/statm", "rb") as statm:
        pages = int(statm.read().split()[0])
    return pages * resource.getpagesize()


class CheckedStream:
    """What the C unpickler reads from: `stream`, with each read above CHECK_READS_ABOVE checked against how
    many bytes remain (`remaining(position, wanted)` says how many of the `wanted` bytes after `position`
    exist) before it is made, text lines bounded, and the memory guard raised as input is read. Small reads
    pass straight through; `peek` (the unpickler prefetches with it) is the stream's own."""

    def __init__(
        self, stream: BinaryIO, name: str, remaining: Callable[[int, int], int], guard: MemoryGuard | None = None
    ) -> None:
        self._stream = stream
        self._name = name
        self._remaining = remaining
        self._guard = guard if guard is not None and guard.active else None
        self._next_raise = _RAISE_EVERY if self._guard else sys.maxsize
        self.position = 0
        if hasattr(stream, "peek"):
            self.peek = stream.peek

    def read(self, size: int = -1) -> bytes:
        if size > CHECK_READS_ABOVE:
            self._check(size)
        data = self._stream.read(size)
        self._advance(len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        size = memoryview(buffer).nbytes
        if size > CHECK_READS_ABOVE:
            self._check(size)
        count = self._stream.readinto(buffer) or 0  # type: ignore[attr-defined]
        self._advance(count)
        return count

    def readline(self, size: int = -1) -> bytes:
        line = self._stream.readline(MAX_LINE if size < 0 else min(size, MAX_LINE))
        self._advance(len(line))
        if len(line) >= MAX_LINE and not line.endswith(b"\n"):
            raise InputError(
                self._name, f"corrupt pickle: a text opcode's line is longer than {MAX_LINE} bytes", hint=_HINT_CORRUPT
            )
        return line

    def _advance(self, count: int) -> None:
        self.position += count
        if self.position >= self._next_raise:
            self._guard.allow(self.position)  # type: ignore[union-attr]
            self._next_raise = self.position + _RAISE_EVERY

    def _check(self, size: int) -> None:
        """Refuse a read of `size` bytes that the input cannot satisfy, before reading any of it."""
        left = self._remaining(self.position, size)
        if left < size:
            raise InputError(
                self._name,
                f"corrupt pickle: it declares a {size}-byte frame or object but only {left} bytes remain",
                hint=_HINT_CORRUPT,
            )
        if self._guard is not None:
            self._guard.allow(self.position + size)  # the data is there: an object this big is honest

    def __enter__(self) -> CheckedStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        closer = getattr(self._remaining, "close", None)
        if closer is not None:
            closer()


def file_remaining(size: int) -> Callable[[int, int], int]:
    """Remaining bytes of an uncompressed input of `size` bytes."""
    return lambda position, wanted: max(0, min(size - position, wanted))


class DecompressedRemaining:
    """Remaining decompressed bytes of a compressed file, counted on a second handle that decompresses ahead,
    1 MiB at a time (bounded memory), and stops as soon as the wanted bytes are found. The handle only moves
    forward, so all checks together decompress the file at most once more."""

    _CHUNK = 1 << 20

    def __init__(self, path: str | Path) -> None:
        self._path = path
        self._handle: BinaryIO | None = None
        self._counted = 0  # decompressed bytes known to exist
        self._ended = False

    def __call__(self, position: int, wanted: int) -> int:
        need = position + wanted
        if self._handle is None:
            self._handle = open_binary(self._path)
        while self._counted < need and not self._ended:
            chunk = self._handle.read(min(self._CHUNK, need - self._counted))
            self._ended = not chunk
            self._counted += len(chunk)
        return max(0, min(self._counted, need) - position)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
