"""Find, without a Python loop per line, the lines of a large text log that contain marker strings, and
their line numbers.

A plain file is memory-mapped and cut into segments; a compressed one is decompressed into buffers of
the same size. Each segment is split at line ends into ~32 KiB blocks, and one polars query over all
blocks (Rust, GIL released) gives every marker each holds, in order; Python sees only the lines that
hold one, numbered by counting newlines with numpy. While the caller works on a segment, polars
searches the next on a thread of its own; every reader's markers are searched at once, so a log is
read once whoever reads it.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
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
        return self.search(buf, lo, hi).lines()

    def search(self, buf: Buffer, lo: int, hi: int, pool: Executor | None = None) -> _Search:
        """`lines`, started: with a `pool`, polars' query runs on its thread (without the GIL) until the lines
        are asked for."""
        return _Search(self, buf, lo, hi, hi - lo >= SMALL_BYTES, pool)

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
        """`lines` with polars, whatever the region's size."""
        return _Search(self, buf, lo, hi, True, None).lines()

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


class _Search:
    """A search of buf[lo:hi] under way. The region is cut into blocks at line ends; one polars query finds
    every match in every block; blocks too short for an arrow view are searched here."""

    def __init__(self, finder: MarkerFinder, buf: Buffer, lo: int, hi: int, polars: bool,
                 pool: Executor | None) -> None:
        self.buf, self.lo = buf, lo
        self.found: list[int] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.region: _Region | None = None
        if not polars:
            self.found = finder.lines_py(buf, lo, hi)
            return
        starts, ends = _blocks(buf, lo, hi)
        small = ends - starts <= _INLINE
        for s, e in zip(starts[small].tolist(), ends[small].tolist(), strict=True):
            self.found += finder.lines_py(buf, lo + s, lo + e)
        self.starts, self.ends = starts[~small].tolist(), ends[~small].tolist()
        if self.starts:
            self.region = _Region(finder.pattern, buf, lo, hi, self.starts, self.ends, pool)

    def lines(self) -> list[int]:
        """The sorted starts of the lines that hold a match (waits for polars)."""
        if self.region is not None:
            for index, matches in self.region.matches():
                self.found += _match_lines(self.buf, self.lo + self.starts[index], self.lo + self.ends[index],
                                           matches)
            self.region = None
        return sorted(set(self.found))

    def cancel(self) -> None:
        """Drop the query if it has not started: nobody will ask for the lines."""
        if self.region is not None:
            self.region.result.cancel()


def _match_lines(buf: Buffer, start: int, end: int, matches: list[str]) -> list[int]:
    """The starts of the lines of buf[start:end] (a block) that hold `matches`, the texts the regex matched
    there in order: each is where the text next occurs (an earlier occurrence would have been the match)."""
    lines, pos = [], start
    for text in matches:
        at = buf.find(text.encode("ascii"), pos, end)
        lines.append(max(start, buf.rfind(b"\n", start, at) + 1))
        pos = at + len(text)
    return lines


class _Region:
    """buf[lo:hi] as an arrow buffer that polars searches through views of its blocks.

    The query runs on the pool's thread when there is one: all its work is polars' (the GIL released
    throughout), and everything in Python stays on the caller's thread, so neither waits for the other's
    GIL. polars needs valid UTF-8 and checks it when binary becomes string; a region that is not is
    searched again, at once, in a copy with every non-ASCII byte masked (see _ASCII_ONLY). Markers are
    ASCII, so the copy matches where the bytes do.
    """

    def __init__(self, pattern: str, buf: Buffer, lo: int, hi: int, starts: list[int], ends: list[int],
                 pool: Executor | None) -> None:
        self.pattern, self.starts, self.ends = pattern, starts, ends
        self.data = np.frombuffer(buf, np.uint8, count=hi - lo, offset=lo)
        query = self._query(pa.py_buffer(buf).slice(lo, hi - lo), pa.binary_view())
        self.result: Future[pl.DataFrame] = pool.submit(query) if pool else _run_now(query)

    def matches(self) -> list[tuple[int, list[str]]]:
        """(index, matched texts) of each block (over _INLINE bytes) that holds a match."""
        try:
            return self.result.result().rows()
        except pl.exceptions.ComputeError:  # invalid UTF-8 somewhere in the region
            masked = self.data.tobytes().translate(_ASCII_ONLY)
            self.data = np.frombuffer(masked, np.uint8)
            return self._query(pa.py_buffer(masked), pa.string_view())().rows()

    def _query(self, buffer: pa.Buffer, kind: pa.DataType) -> Callable[[], pl.DataFrame]:
        """polars' regex over zero-copy views of the blocks: every match of each block that has one."""
        first = np.asarray(self.starts, np.int64)
        views = np.zeros(len(first), _VIEW)
        views["len"] = np.asarray(self.ends, np.int64) - first
        views["off"] = first
        views["prefix"] = self.data[first[:, None] + np.arange(4)].view("V4").ravel()
        series = pl.from_arrow(pa.Array.from_buffers(kind, len(first), [None, pa.py_buffer(views), buffer]))
        assert isinstance(series, pl.Series)
        # Eager: one thread of polars' (the lazy engine would take both cores from the caller's parsing).
        frame = series.to_frame("part").with_row_index("index")
        return lambda: frame.select(
            "index", pl.col("part").cast(pl.String).str.extract_all(self.pattern).alias("matches")
        ).filter(pl.col("matches").list.len() > 0)


def _run_now(job: Callable[[], pl.DataFrame]) -> Future[pl.DataFrame]:
    """`job`'s result (or error) as a finished future."""
    future: Future[pl.DataFrame] = Future()
    try:
        future.set_result(job())
    except Exception as exc:  # handed to whoever asks for the result, as a pool's future would
        future.set_exception(exc)
    return future


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

    While the caller works on a window, polars searches the next one on its own threads. A compressed
    buffer holds LOOKAHEAD_BYTES after its scan region, so a message that starts in the region can be
    read whole; with a `segment` smaller than that, buffers accumulate reads.
    """
    path = Path(path)
    segment = max(1, segment)
    if compression_of(path) is None:
        raw = _mapped_windows(path, segment)
    else:
        raw = _stream_windows(path, segment, LOOKAHEAD_BYTES)
    readers = _Readers(finders)
    line, pending = 1, None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="oomlab-scan") as pool:
        try:
            for window in raw:
                started = (window, readers.union.search(window.buf, window.lo, window.hi, pool))
                if pending is not None:
                    done, line = readers.marked(*pending, line)
                    yield done
                    _release(done.buf, done.lo)
                pending = started
            if pending is not None:
                done, line = readers.marked(*pending, line)
                pending = None
                yield done
        finally:
            if pending is not None:
                pending[1].cancel()


class _Readers:
    """The finders whose marker lines a scan hands out: one search for all their markers, then which
    finder's markers each line holds, and the lines' numbers."""

    def __init__(self, finders: Sequence[MarkerFinder]) -> None:
        self.markers = list(dict.fromkeys(f.markers for f in finders))
        self.union = MarkerFinder([m for markers in self.markers for m in markers])

    def marked(self, window: Window, search: _Search, line: int) -> tuple[Window, int]:
        """`window` (whose first line is number `line`) with its marks, and the number of the line after it."""
        union = search.lines()
        marks, pos, at = _numbered(window.arr, union, window.lo, line)
        number = dict(marks)
        found = {markers: tuple((start, number[start]) for start in starts)
                 for markers, starts in zip(self.markers, self.union.split(window.buf, union, self.markers),
                                            strict=True)}
        return replace(window, line=line, found=found), at + count_newlines(window.arr, pos, window.hi)
