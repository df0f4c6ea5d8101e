"""Find, without a Python loop per line, the lines of a large text log that contain marker strings, and
their line numbers.

A plain file is memory-mapped and cut into segments; a compressed one is decompressed into buffers of
the same size. Each segment is split at line ends into ~32 KiB blocks, and one polars regex `find`
over all blocks (Rust, GIL released) gives the first marker in each; the rest of a block that had one
is searched again, until no block has more. Python sees only the lines that hold a marker, numbered by
counting newlines with numpy. The next segments are searched in a background thread while the caller
works on the current ones; every reader's markers are searched at once, so a log is read once whoever
reads it.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from .compression import compression_of, open_binary

BLOCK_BYTES = 32 << 10
SEGMENT_BYTES = 32 << 20
SMALL_BYTES = 1 << 20  # below this, bytes.find per marker beats building a polars frame
LOOKAHEAD_BYTES = 64 << 10  # a compressed buffer always holds this much after its scan region
BEHIND_LINES = 4  # and this many lines before it, for messages that start before their marker
_COUNT_PIECE = 1 << 20  # count newlines in pieces that stay in the CPU cache
_MAX_SEGMENT = 1 << 30  # arrow views address a segment with 32-bit offsets
_MAX_LINE = 64 << 20  # a compressed log's line longer than this is searched in pieces
_INLINE = 12  # arrow keeps values up to 12 bytes inside the view; those are searched in Python
_BATCH = 2  # segments searched in one go by the worker thread

# Arrow's binary_view layout: length, 4-byte prefix, buffer index, offset (values over 12 bytes).
_VIEW = np.dtype([("len", "<i4"), ("prefix", "V4"), ("buf", "<i4"), ("off", "<i4")])
# Markers are ASCII, so masking every non-ASCII byte keeps each match where it was and makes the
# text valid UTF-8, which polars' string functions insist on.
_ASCII_ONLY = bytes(range(128)) + b"?" * 128

Buffer = Any  # bytes, bytearray or mmap.mmap: the buffer protocol plus find/rfind
Mark = tuple[int, int]  # a line that holds a marker: its start in the window's buffer, its 1-based line number


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
        # A marker that holds another one finds no line the other does not: the search skips it (fewer
        # literals make the regex's prefilter faster); `split` tells the readers' markers apart again.
        needed = [m for m in dict.fromkeys(self.markers) if not any(o != m and o in m for o in self.markers)]
        self.pattern = "|".join(_rust_escape(m) for m in needed)

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
        """`lines` with polars: the first match per block, then again in what is left of each block."""
        region = _Region(self.pattern, buf, lo, hi)
        starts, ends = _blocks(buf, lo, hi)
        found: list[int] = []
        while len(starts):
            small = ends - starts <= _INLINE  # too short for an arrow view: search them here
            for s, e in zip(starts[small].tolist(), ends[small].tolist(), strict=True):
                found += self.lines_py(buf, lo + s, lo + e)
            starts, ends = starts[~small], ends[~small]
            first = region.first_matches(starts, ends)
            hit = first >= 0
            lines, nexts = _line_bounds(buf, lo, hi, first[hit].tolist())
            found += lines
            starts, ends = np.asarray(nexts, np.int64), ends[hit]
            keep = ends > starts
            starts, ends = starts[keep], ends[keep]
        return sorted(set(found))

    def split(self, buf: Buffer, starts: list[int], readers: Sequence[tuple[bytes, ...]]) -> list[list[int]]:
        """For each reader's markers (together this finder's), the lines of `starts` that hold one of them."""
        if len(readers) == 1:
            return [starts]
        out: list[list[int]] = [[] for _ in readers]
        for start in starts:
            end = buf.find(b"\n", start)
            text = buf[start : len(buf) if end < 0 else end]
            for found, markers in zip(out, readers, strict=True):
                if any(m in text for m in markers):
                    found.append(start)
        return out


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


class _Region:
    """buf[lo:hi] as an arrow buffer that polars searches through views of its blocks.

    polars needs valid UTF-8 and checks it when binary becomes string. The first search casts, so
    the whole region is checked once (or, if that fails, masked: see _ASCII_ONLY); later searches
    view parts of the checked region as strings directly. Parts start after a newline and end
    after one, and a newline is never inside a UTF-8 sequence, so every part is valid too.
    """

    def __init__(self, pattern: str, buf: Buffer, lo: int, hi: int) -> None:
        self.pattern = pattern
        self.buffer = pa.py_buffer(buf).slice(lo, hi - lo)
        self.data = np.frombuffer(buf, np.uint8, count=hi - lo, offset=lo)
        self.checked = False

    def first_matches(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Per part (offsets relative to lo, each over _INLINE bytes), the offset of its first match or -1."""
        if not len(starts):
            return np.empty(0, np.int64)
        if not self.checked:
            self.checked = True
            try:
                found = self._search(starts, ends, pa.binary_view())
            except pl.exceptions.ComputeError:  # invalid UTF-8 somewhere in the region
                masked = self.data.tobytes().translate(_ASCII_ONLY)
                self.buffer, self.data = pa.py_buffer(masked), np.frombuffer(masked, np.uint8)
                found = self._search(starts, ends, pa.string_view())
        else:
            found = self._search(starts, ends, pa.string_view())
        return np.where(found >= 0, found + starts, -1)

    def _search(self, starts: np.ndarray, ends: np.ndarray, kind: pa.DataType) -> np.ndarray:
        """polars' regex find over zero-copy views of the parts: offsets within each part, or -1."""
        views = np.zeros(len(starts), _VIEW)
        views["len"] = ends - starts
        views["off"] = starts
        views["prefix"] = self.data[starts[:, None] + np.arange(4)].view("V4").ravel()
        array = pa.Array.from_buffers(kind, len(starts), [None, pa.py_buffer(views), self.buffer])
        series = pl.from_arrow(array)
        assert isinstance(series, pl.Series)
        # One select, so one release of the GIL for the cast, the search and the rest.
        found = series.to_frame("part").select(
            pl.col("part").cast(pl.String).str.find(self.pattern).cast(pl.Int64).fill_null(-1)
        )
        return np.asarray(found.to_series().to_numpy(), np.int64)


@dataclass(frozen=True, slots=True)
class Window:
    """Part of the decompressed log: buf[lo:hi] is searched, the bytes around it may be read."""

    buf: Buffer
    arr: np.ndarray  # buf as uint8, for counting newlines
    base: int  # offset of buf[0] in the decompressed log
    lo: int  # a line start
    hi: int  # a line start, or the end of the log
    line: int = 1  # the number of the line at lo
    found: Mapping[tuple[bytes, ...], tuple[Mark, ...]] = field(default_factory=dict)  # marks searched ahead

    def marked(self, finder: MarkerFinder) -> tuple[Mark, ...]:
        """The lines in [lo, hi) that hold one of `finder`'s markers, in order: searched ahead when iter_windows
        was asked for these markers, else searched now."""
        ahead = self.found.get(finder.markers)
        if ahead is not None:
            return ahead
        return tuple(_numbered(self.arr, finder.lines(self.buf, self.lo, self.hi), self.lo, self.line)[0])


def _numbered(arr: np.ndarray, starts: Sequence[int], lo: int, line: int) -> tuple[list[Mark], int, int]:
    """Sorted line starts from `lo` on (whose line is number `line`) with their numbers; and the last start
    and its number, from where counting goes on."""
    marks, pos = [], lo
    for start in starts:
        line += count_newlines(arr, pos, start)
        marks.append((start, line))
        pos = start
    return marks, pos, line


def _mapped_windows(path: Path, segment: int) -> Iterator[Window]:
    """Segments of a memory-mapped plain file.

    `iter_windows` unmaps the pages of segments already dealt with (see `_release`).
    """
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


def _release(buf: Buffer, upto: int) -> None:
    """Unmap the pages of a memory-mapped log before `upto` (less a MiB that a message may look back
    into), so resident memory stays at a few segments whatever the file size; the page cache keeps them."""
    upto -= (1 << 20) + upto % mmap.PAGESIZE
    if isinstance(buf, mmap.mmap) and upto > 0 and hasattr(mmap, "MADV_DONTNEED"):
        buf.madvise(mmap.MADV_DONTNEED, 0, upto)


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
    """Where the scan region of a non-final buffer ends: a line start `lookahead` bytes from its end.

    `lo` itself (an empty region: read more first) while the line at `lo` has no end in sight yet;
    inside the line only once it is longer than _MAX_LINE.
    """
    limit = len(buf) - lookahead
    end = buf.rfind(b"\n", lo, max(lo, limit))
    if end >= 0:
        return end + 1
    return limit if limit - lo > _MAX_LINE else lo


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


def iter_windows(path: str | Path, finders: Sequence[MarkerFinder], *,
                 segment: int = SEGMENT_BYTES) -> Iterator[Window]:
    """The windows of the log at `path` in order, numbered, each with the marker lines of every finder found
    ahead of time (`Window.marked`), in one search for all their markers.

    A compressed buffer holds LOOKAHEAD_BYTES after its scan region, so a message that starts in
    the region can be read whole; with a `segment` smaller than that, buffers accumulate reads.
    """
    path = Path(path)
    segment = max(1, segment)
    if compression_of(path) is None:
        raw = _mapped_windows(path, segment)
    else:
        raw = _stream_windows(path, segment, LOOKAHEAD_BYTES)
    search = _Search(finders)
    batches = _batches(raw)
    line = 1
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="oomlab-scan") as pool:
        batch = next(batches, None)
        future = pool.submit(search, batch) if batch else None
        while batch and future:
            found = future.result()
            following = next(batches, None)
            future = pool.submit(search, following) if following else None
            for window, (union, split) in zip(batch, found, strict=True):
                # Numbering here rather than in the worker: numpy releases the GIL for each piece it counts,
                # and the worker would then wait for it behind the caller's parsing every time.
                marks, pos, at = _numbered(window.arr, union, window.lo, line)
                number = dict(marks)
                yield replace(window, line=line, found={
                    markers: tuple((start, number[start]) for start in starts)
                    for markers, starts in zip(search.readers, split, strict=True)})
                line = at + count_newlines(window.arr, pos, window.hi)
            _release(batch[-1].buf, batch[-1].lo)
            batch = following


def _batches(windows: Iterator[Window]) -> Iterator[list[Window]]:
    """Windows in groups of _BATCH: the unit a worker searches while the caller parses the previous.

    The caller's numpy calls (counting newlines) release the GIL between its messages, so the
    worker, whose polars and numpy calls each need the GIL back when they return, is not starved.
    """
    batch: list[Window] = []
    for window in windows:
        batch.append(window)
        if len(batch) == _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


class _Search:
    """The worker's job: one search for the markers of every finder, then which finder's markers each line holds."""

    def __init__(self, finders: Sequence[MarkerFinder]) -> None:
        self.readers = list(dict.fromkeys(f.markers for f in finders))
        self.union = MarkerFinder([m for markers in self.readers for m in markers])

    def __call__(self, batch: list[Window]) -> list[tuple[list[int], list[list[int]]]]:
        """Per window of a batch: the lines holding any marker, and those holding each finder's."""
        found = []
        for window in batch:
            union = self.union.lines(window.buf, window.lo, window.hi)
            found.append((union, self.union.split(window.buf, union, self.readers)))
        return found
