"""A plain file read in place through `os.pread`: its length, slices, `find` and `rfind`, as `bytes` and
`mmap` offer them, without mapping it.

A memory map of a log that logrotate's `copytruncate` empties under the read raises SIGBUS on the next touch of
a page past the new end, and that signal kills the process with no word (issue 36). A read of those bytes
instead comes back short: the scan ends early, and `ingest/run.FileState` sees the file changed and stores
nothing of it.
"""

from __future__ import annotations

import os
from pathlib import Path

BLOCK_BYTES = 1 << 20  # reads are whole aligned blocks: a scan's nearby lookups hit the block it just read
_KEPT_BLOCKS = 4  # a lookup behind a hit and the hit itself seldom span more


class FileView:
    """The first `len(self)` bytes of a file (its size when opened), read as they are asked for."""

    def __init__(self, path: str | Path) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size
        self._blocks: dict[int, bytes] = {}

    def __len__(self) -> int:
        return self._size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FileView:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def read(self, lo: int, hi: int) -> bytes:
        """Bytes [lo, hi) clipped to the view; fewer where the file has shrunk since it was opened."""
        lo, hi = max(0, lo), min(hi, self._size)
        if hi <= lo:
            return b""
        first, last = lo // BLOCK_BYTES, (hi - 1) // BLOCK_BYTES
        if last - first >= _KEPT_BLOCKS:  # a large read goes straight to the file, past the block cache
            return self._pread(lo, hi - lo)
        joined = b"".join(self._block(index) for index in range(first, last + 1))
        return joined[lo - first * BLOCK_BYTES : hi - first * BLOCK_BYTES]

    def __getitem__(self, key: slice) -> bytes:
        start, stop, step = key.indices(self._size)
        if step != 1:
            raise ValueError("a FileView slices with step 1 only")
        return self.read(start, stop)

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        """The first offset of `sub` in [start, end), or -1; read a block at a time."""
        end = self._size if end is None else min(end, self._size)
        at = max(0, start)
        while at < end:
            upto = min(end, (at // BLOCK_BYTES + 1) * BLOCK_BYTES + len(sub) - 1)
            piece = self.read(at, upto)
            found = piece.find(sub)
            if found >= 0:
                return at + found
            if len(piece) < upto - at:  # the file shrank: nothing more to find
                return -1
            at = upto - len(sub) + 1 if upto < end else end
        return -1

    def rfind(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        """The last offset of `sub` in [start, end), or -1; read a block at a time backwards."""
        end = self._size if end is None else min(end, self._size)
        start = max(0, start)
        while end - start >= len(sub):
            lo = max(start, ((end - 1) // BLOCK_BYTES) * BLOCK_BYTES - len(sub) + 1)
            found = self.read(lo, end).rfind(sub)
            if found >= 0:
                return lo + found
            if lo == start:
                return -1
            end = lo + len(sub) - 1
        return -1

    def _block(self, index: int) -> bytes:
        block = self._blocks.get(index)
        if block is None:
            if len(self._blocks) >= _KEPT_BLOCKS:
                self._blocks.pop(next(iter(self._blocks)))
            block = self._blocks[index] = self._pread(index * BLOCK_BYTES, BLOCK_BYTES)
        return block

    def _pread(self, offset: int, size: int) -> bytes:
        parts, got = [], 0
        while got < size:
            part = os.pread(self._fd, size - got, offset + got)
            if not part:
                break
            parts.append(part)
            got += len(part)
        return b"".join(parts)
