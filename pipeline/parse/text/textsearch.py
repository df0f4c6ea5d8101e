"""The polars engine of `textscan`: the lines of a region of a buffer that hold a marker, found by one
polars regex query over zero-copy arrow views of ~32 KiB blocks (Rust, GIL released), so a region can be
searched on a thread beside the caller's Python work. Imported only when a search needs it: polars and
pyarrow cost a fifth of a second to import.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, Protocol

import numpy as np
import polars as pl
import pyarrow as pa

BLOCK_BYTES = 32 << 10
_INLINE = 12  # arrow keeps values up to 12 bytes inside the view; those are searched in Python

# Arrow's binary_view layout: length, 4-byte prefix, buffer index, offset (values over 12 bytes).
_VIEW = np.dtype([("len", "<i4"), ("prefix", "V4"), ("buf", "<i4"), ("off", "<i4")])
# Markers are ASCII, so masking every non-ASCII byte keeps each match where it was and makes the
# text valid UTF-8, which polars' string functions insist on.
_ASCII_ONLY = bytes(range(128)) + b"?" * 128

Buffer = Any  # bytes, bytearray or mmap.mmap: the buffer protocol plus find/rfind


class MarkerFinder(Protocol):
    """What a search needs of `textscan.MarkerFinder` (named here so that this module imports nothing of it)."""

    pattern: str  # the markers as one Rust regex

    def lines_py(self, buf: Buffer, lo: int, hi: int) -> list[int]: ...


def _blocks(buf: Buffer, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Block bounds relative to lo, each block ending just after a newline (or at hi)."""
    bounds, pos = [0], lo
    while pos < hi:
        end = buf.find(b"\n", min(pos + BLOCK_BYTES, hi), hi)
        pos = hi if end < 0 else end + 1
        bounds.append(pos - lo)
    edges = np.asarray(bounds, np.int64)
    return edges[:-1], edges[1:]


class Search:
    """A search of buf[lo:hi] under way. The region is cut into blocks at line ends; one polars query finds
    every match in every block; blocks too short for an arrow view are searched here."""

    def __init__(
        self, finder: MarkerFinder, buf: Buffer, lo: int, hi: int, polars: bool, pool: Executor | None
    ) -> None:
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
                self.found += _match_lines(self.buf, self.lo + self.starts[index], self.lo + self.ends[index], matches)
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

    def __init__(
        self, pattern: str, buf: Buffer, lo: int, hi: int, starts: list[int], ends: list[int], pool: Executor | None
    ) -> None:
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
