"""Find, without a Python loop per line, the lines of a large text log that contain marker strings.

A plain file is memory-mapped and cut into segments; a compressed one is decompressed into buffers of
the same size. Each segment is split at line ends into ~16 KiB blocks, and one polars regex `find`
over all blocks (Rust, GIL released) gives the first marker in each; the rest of a block that had one
is searched again, until no block has more. Python sees only the lines that hold a marker. The next
segment is searched in a background thread while the caller works on the current one.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from .compression import compression_of, open_binary

BLOCK_BYTES = 16 << 10
SEGMENT_BYTES = 32 << 20
SMALL_BYTES = 1 << 20  # below this, bytes.find per marker beats building a polars frame
LOOKAHEAD_BYTES = 64 << 10  # a compressed buffer always holds this much after its scan region
BEHIND_LINES = 4  # and this many lines before it, for messages that start before their marker
_COUNT_PIECE = 1 << 20  # count newlines in pieces that stay in the CPU cache
_MAX_SEGMENT = 1 << 30  # arrow views address a segment with 32-bit offsets
_INLINE = 12  # arrow keeps values up to 12 bytes inside the view; those are searched in Python

# Arrow's binary_view layout: length, 4-byte prefix, buffer index, offset (values over 12 bytes).
_VIEW = np.dtype([("len", "<i4"), ("prefix", "V4"), ("buf", "<i4"), ("off", "<i4")])
# Markers are ASCII, so masking every non-ASCII byte keeps each match where it was and makes the
# text valid UTF-8, which polars' string functions insist on.
_ASCII_ONLY = bytes(range(128)) + b"?" * 128

Buffer = Any  # bytes, bytearray or mmap.mmap: the buffer protocol plus find/rfind


def _rust_escape(marker: bytes) -> str:
    """`marker` as a literal in Rust regex syntax."""
    return re.sub(r"([\\.+*?()|\[\]{}^$#&\-~])", r"\\\1", marker.decode("ascii"))


def count_newlines(arr: np.ndarray, start: int, end: int) -> int:
    """The number of b"\\n" in arr[start:end] (arr: the buffer's bytes as uint8)."""
    total = 0
    for piece in range(start, end, _COUNT_PIECE):
        total += int(np.count_nonzero(arr[piece : min(piece + _COUNT_PIECE, end)] == 10))
    return total


class MarkerFinder:
    """Finds the lines that contain any of `markers` in a region of a buffer."""

    def __init__(self, markers: Sequence[bytes]) -> None:
        self.markers = tuple(markers)
        self.pattern = "|".join(_rust_escape(m) for m in self.markers)

    def lines(self, buf: Buffer, lo: int, hi: int) -> list[int]:
        """Sorted start offsets of the lines in buf[lo:hi] that hold a marker (lo is a line start)."""
        if hi - lo < SMALL_BYTES:
            return self.lines_py(buf, lo, hi)
        return self._lines_polars(buf, lo, hi)

    def lines_py(self, buf: Buffer, lo: int, hi: int) -> list[int]:
        """`lines` with one bytes.find pass per marker: for small regions."""
        found: set[int] = set()
        for marker in self.markers:
            pos = buf.find(marker, lo, hi)
            while pos >= 0:
                found.add(max(lo, buf.rfind(b"\n", lo, pos) + 1))
                end = buf.find(b"\n", pos, hi)
                pos = -1 if end < 0 else buf.find(marker, end + 1, hi)
        return sorted(found)

    def _lines_polars(self, buf: Buffer, lo: int, hi: int) -> list[int]:
        """`lines` with polars: rounds of "first match per block", each on what is left of the blocks."""
        data = np.frombuffer(buf, np.uint8, count=hi - lo, offset=lo)
        region = pa.py_buffer(buf).slice(lo, hi - lo)
        starts, ends = _blocks(buf, lo, hi)
        found: list[int] = []
        while len(starts):
            small = ends - starts <= _INLINE
            for s, e in zip(starts[small].tolist(), ends[small].tolist(), strict=True):
                found += self.lines_py(buf, lo + s, lo + e)
            starts, ends = starts[~small], ends[~small]
            first = _first_matches(self.pattern, region, data, starts, ends)
            hit = first >= 0
            lines, nexts = _line_bounds(buf, lo, hi, first[hit].tolist())
            found += lines
            starts, ends = np.asarray(nexts, np.int64), ends[hit]
            keep = starts < ends
            starts, ends = starts[keep], ends[keep]
        return sorted(set(found))


def _blocks(buf: Buffer, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Block bounds relative to lo, each block ending just after a newline (or at hi)."""
    bounds, pos = [0], lo
    while pos < hi:
        end = buf.find(b"\n", min(pos + BLOCK_BYTES, hi), hi)
        pos = hi if end < 0 else end + 1
        bounds.append(pos - lo)
    edges = np.asarray(bounds, np.int64)
    return edges[:-1], edges[1:]


def _line_bounds(buf: Buffer, lo: int, hi: int, positions: list[int]) -> tuple[list[int], list[int]]:
    """For match positions (relative to lo): their line starts (absolute) and next line starts (relative)."""
    lines, nexts = [], []
    for pos in positions:
        lines.append(max(lo, buf.rfind(b"\n", lo, lo + pos) + 1))
        end = buf.find(b"\n", lo + pos, hi)
        nexts.append((hi if end < 0 else end + 1) - lo)
    return lines, nexts


def _first_matches(pattern: str, region: pa.Buffer, data: np.ndarray, starts: np.ndarray,
                   ends: np.ndarray) -> np.ndarray:
    """Per block, the offset (relative to the region) of its first match, or -1."""
    if not len(starts):
        return np.empty(0, np.int64)
    try:
        found = _search_blocks(pattern, region, data, starts, ends)
    except pl.exceptions.ComputeError:  # invalid UTF-8 somewhere in the region
        masked = data.tobytes().translate(_ASCII_ONLY)
        found = _search_blocks(pattern, pa.py_buffer(masked), np.frombuffer(masked, np.uint8), starts, ends)
    return np.where(found >= 0, found + starts, -1)


def _search_blocks(pattern: str, region: pa.Buffer, data: np.ndarray, starts: np.ndarray,
                   ends: np.ndarray) -> np.ndarray:
    """polars' regex find over zero-copy views of the blocks: offsets within each block, or -1."""
    views = np.zeros(len(starts), _VIEW)
    views["len"] = ends - starts
    views["off"] = starts
    views["prefix"] = data[starts[:, None] + np.arange(4)].view("V4").ravel()
    array = pa.Array.from_buffers(pa.binary_view(), len(starts), [None, pa.py_buffer(views), region])
    series = pl.from_arrow(array).cast(pl.String)  # type: ignore[union-attr]
    found = series.str.find(pattern).cast(pl.Int64).fill_null(-1).to_numpy()
    return np.asarray(found, np.int64)


@dataclass(frozen=True, slots=True)
class Window:
    """Part of the decompressed log: buf[lo:hi] is searched, the bytes around it may be read."""

    buf: Buffer
    arr: np.ndarray  # buf as uint8, for counting newlines
    base: int  # offset of buf[0] in the decompressed log
    lo: int  # a line start
    hi: int  # a line start, or the end of the log
    hits: tuple[int, ...] = ()  # starts of the lines in [lo, hi) that hold a marker


def _mapped_windows(path: Path, segment: int) -> Iterator[Window]:
    """Segments of a memory-mapped plain file."""
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        if size == 0:
            return
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    arr = np.frombuffer(mapped, np.uint8)
    lo = 0
    while lo < size:
        end = mapped.find(b"\n", min(lo + segment, size), min(lo + _MAX_SEGMENT, size))
        hi = size if end < 0 else end + 1
        yield Window(mapped, arr, 0, lo, hi)
        lo = hi


def _read_full(stream: Any, size: int) -> bytes:
    """Up to `size` bytes from `stream`, fewer only at its end (zstd readers return short reads)."""
    parts, got = [], 0
    while got < size:
        part = stream.read(size - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _cut(buf: bytes, lo: int, lookahead: int) -> int:
    """Where the scan region of a non-final buffer ends: a line start `lookahead` bytes from its end."""
    limit = len(buf) - lookahead
    end = buf.rfind(b"\n", lo, max(lo, limit))
    if end >= 0:
        return end + 1
    return max(lo, limit)  # a single line longer than a buffer: cut inside it


def _behind(buf: bytes, hi: int, lookahead: int) -> int:
    """The start of the line BEHIND_LINES before `hi`, kept for messages that begin before their marker."""
    start = hi
    for _ in range(BEHIND_LINES):
        if start <= 0:
            break
        start = buf.rfind(b"\n", max(0, hi - lookahead), start - 1) + 1
    return max(0, min(start, hi))


def _stream_windows(path: Path, segment: int, lookahead: int) -> Iterator[Window]:
    """Successive buffers of a compressed file, each overlapping the next by a few lines."""
    with open_binary(path) as stream:
        carry, base, lo = b"", 0, 0
        while True:
            data = _read_full(stream, segment)
            buf = carry + data
            final = len(data) < segment
            hi = len(buf) if final else _cut(buf, lo, lookahead)
            yield Window(buf, np.frombuffer(buf, np.uint8), base, lo, hi)
            if final:
                return
            keep = _behind(buf, hi, lookahead)
            carry, base, lo = buf[keep:], base + keep, hi - keep


def iter_windows(path: str | Path, finder: MarkerFinder, *, segment: int = SEGMENT_BYTES) -> Iterator[Window]:
    """The windows of the log at `path` in order, each with its marker lines found ahead of time.

    A compressed buffer holds at least `lookahead` bytes (LOOKAHEAD_BYTES, or half a small test
    segment) after its scan region, so a message that starts in the region can be read whole.
    """
    path = Path(path)
    lookahead = min(LOOKAHEAD_BYTES, max(1, segment // 2))
    if compression_of(path) is None:
        raw = _mapped_windows(path, segment)
    else:
        raw = _stream_windows(path, segment, lookahead)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="oomlab-scan") as pool:
        pending = None
        for window in raw:
            future = pool.submit(finder.lines, window.buf, window.lo, window.hi)
            if pending is not None:
                yield replace(pending[0], hits=tuple(pending[1].result()))
            pending = (window, future)
        if pending is not None:
            yield replace(pending[0], hits=tuple(pending[1].result()))
