"""Find, without a Python loop per line, the lines of a large text log that contain marker strings, and
their line numbers.

A plain file is searched by ripgrep (`parse/ripgrep.py`): one pass in a process of its own, for short
`needles` that every marker holds, that numbers the lines as well, read as it goes; each hit is checked back
to the markers in place, and Python reads the windows around them with pread (`fileview`: never a memory
map, which a log truncated under the read turns into SIGBUS). Without rg, and for compressed logs, the log is
read (decompressed) into buffers and searched in-process: it is cut into segments,
each split at line ends into ~32 KiB blocks that one polars query searches (`textsearch`, Rust, GIL
released), and the lines that hold a marker are numbered by counting newlines with numpy; while the caller
works on a segment, polars searches the next on a thread of its own. Either way every reader's markers are
searched at once, so a log is read once whoever reads it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..compression import compression_of, open_counted
from ..facts import count_newlines
from .fileview import FileView
from .needles import Needles, needles_for
from .ripgrep import Hit, RipgrepSearch, ripgrep_binary

if TYPE_CHECKING:
    from .textsearch import Search

SEGMENT_BYTES = 32 << 20
SMALL_BYTES = 1 << 20  # below this, bytes.find per marker beats building a polars frame
LOOKAHEAD_BYTES = 64 << 10  # a compressed buffer always holds this much after its scan region
BEHIND_LINES = 4  # and this many lines before it, for messages that start before their marker
_MAX_SEGMENT = 1 << 30  # arrow views address a segment with 32-bit offsets
_MAX_LINE = 64 << 20  # a compressed log's line longer than this is searched in pieces
# The most of one line a reader decodes: a message (with its stack, say, in a JSON record's one line) is at most
# textlog.MAX_MESSAGE_BYTES (32 KiB), so a longer line is read as its head (where its time and record prefix
# are) and the text around its first marker. A 4 GiB line without a newline then costs a scan for the marker
# in place, not gigabytes of decoded copies.
LINE_TEXT_BYTES = 64 << 10
_LINE_HEAD_BYTES = 1 << 10

Buffer = Any  # bytes, bytearray or FileView: slicing plus find/rfind
Mark = tuple[int, int]  # a line that holds a marker: its start in the window's buffer, its 1-based line number


def _rust_escape(marker: bytes) -> str:
    """`marker` as a literal in Rust regex syntax."""
    return re.sub(r"([\\.+*?()|\[\]{}^$#&\-~])", r"\\\1", marker.decode("ascii"))


class MarkerFinder:
    """Finds the lines that contain any of `markers` in a region of a buffer."""

    def __init__(self, markers: Sequence[bytes]) -> None:
        self.markers = tuple(markers)
        # A marker that holds another one finds no line the other does not: the search skips it (fewer
        # literals make the regex's prefilter faster); `split` tells the readers' markers apart again.
        needed = [m for m in dict.fromkeys(self.markers) if not any(o != m and o in m for o in self.markers)]
        self.needed = tuple(needed)
        self.pattern = "|".join(_rust_escape(m) for m in needed)
        self.regex = re.compile(b"|".join(re.escape(m) for m in needed))  # for one line at a time

    def lines(self, buf: Buffer, lo: int, hi: int) -> list[int]:
        """Sorted start offsets of the lines in buf[lo:hi] that hold a marker (lo is a line start)."""
        return self.search(buf, lo, hi).lines()

    def search(self, buf: Buffer, lo: int, hi: int, pool: Executor | None = None) -> Search:
        """`lines`, started: with a `pool`, polars' query runs on its thread (without the GIL) until the lines
        are asked for."""
        from .textsearch import Search

        return Search(self, buf, lo, hi, hi - lo >= SMALL_BYTES, pool)

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

    def first(self, buf: Buffer, start: int, end: int) -> int:
        """Where the first marker in buf[start:end] begins, or -1. Python's regex crawls through a line of many
        megabytes (16 MB/s with these alternations); bytes.find runs at memory speed, so a long region is
        searched marker by marker, each search ending where the earliest hit so far does."""
        if end - start <= LINE_TEXT_BYTES:
            found = self.regex.search(buf, start, end)
            return -1 if found is None else found.start()
        first = -1
        for marker in self.needed:
            at = buf.find(marker, start, end if first < 0 else first + len(marker) - 1)
            if at >= 0 and (first < 0 or at < first):
                first = at
        return first

    def _lines_polars(self, buf: Buffer, lo: int, hi: int) -> list[int]:
        """`lines` with polars, whatever the region's size."""
        from .textsearch import Search

        return Search(self, buf, lo, hi, True, None).lines()

    def split(self, buf: Buffer, starts: list[int], readers: Sequence[MarkerFinder]) -> list[list[int]]:
        """For each reader (together this finder's markers), the lines of `starts` that hold one of its markers."""
        if len(readers) == 1:
            return [starts]
        out: list[list[int]] = [[] for _ in readers]
        for start in starts:
            end = buf.find(b"\n", start)
            end = len(buf) if end < 0 else end
            for found, reader in zip(out, readers, strict=True):
                if reader.first(buf, start, end) >= 0:  # in place: no copy of the line
                    found.append(start)
        return out


@dataclass(frozen=True, slots=True)
class Window:
    """Part of the decompressed log: buf[lo:hi] is searched, the bytes around it may be read."""

    buf: Buffer
    base: int  # offset of buf[0] in the decompressed log
    lo: int  # a line start
    hi: int  # a line start, or the end of the log
    line: int = 1  # the number of the line at lo
    found: Mapping[tuple[bytes, ...], tuple[Mark, ...]] = field(default_factory=dict)  # marks searched ahead
    progress: float = 0.0  # the share of the file's stored bytes read once this window is done (0-1)

    def marked(self, finder: MarkerFinder) -> tuple[Mark, ...]:
        """The lines in [lo, hi) that hold one of `finder`'s markers, in order: searched ahead when iter_windows
        was asked for these markers, else searched now."""
        ahead = self.found.get(finder.markers)
        if ahead is not None:
            return ahead
        return tuple(_numbered(self.buf, finder.lines(self.buf, self.lo, self.hi), self.lo, self.line)[0])

    def marked_lines(self, finder: MarkerFinder) -> Iterator[tuple[int, str]]:
        """`marked` as (line number, the line's text, bounded by `line_text`): only these lines are decoded."""
        for hit, line in self.marked(finder):
            end = self.buf.find(b"\n", hit, len(self.buf))
            yield line, line_text(self.buf, hit, len(self.buf) if end < 0 else end, finder)


def line_text(buf: Buffer, start: int, end: int, finder: MarkerFinder) -> str:
    """The decoded line at buf[start:end]; a line over LINE_TEXT_BYTES as its head, an elision mark that says
    how much was left out, and the text around the first of `finder`'s markers (if any) after the head."""
    if end - start <= LINE_TEXT_BYTES:
        return buf[start:end].decode("utf-8", errors="replace")
    head_end = start + _LINE_HEAD_BYTES
    found = finder.first(buf, head_end, end)  # in place: no copy of the line
    half = (LINE_TEXT_BYTES - _LINE_HEAD_BYTES) // 2
    if found < 0:
        lo, hi = head_end, head_end
    else:
        lo = max(head_end, found - half)
        hi = min(end, lo + 2 * half)
    head = buf[start:head_end].decode("utf-8", errors="replace")
    tail = buf[lo:hi].decode("utf-8", errors="replace")
    left_out = (end - start) - (head_end - start) - (hi - lo)
    return f"{head} [... {left_out:,} bytes of a {end - start:,}-byte line left out ...] {tail}"


def _numbered(buf: Buffer, starts: Sequence[int], lo: int, line: int) -> tuple[list[Mark], int, int]:
    """Sorted line starts from `lo` on (whose line is number `line`) with their numbers; and the last start
    and its number, from where counting goes on."""
    marks, pos = [], lo
    for start in starts:
        line += count_newlines(buf, pos, start)
        marks.append((start, line))
        pos = start
    return marks, pos, line


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
    stored = max(1, path.stat().st_size)
    with open_counted(path) as (stream, stored_read):
        carry, base, lo = b"", 0, 0
        while True:
            data = _read_full(stream, segment)
            buf = carry + data
            final = len(data) < segment
            hi = len(buf) if final else _cut(buf, lo, lookahead)
            yield Window(buf, base, lo, hi, progress=1.0 if final else min(1.0, stored_read() / stored))
            if final:
                return
            keep = _behind(buf, hi, lookahead)
            carry, base, lo = buf[keep:], base + keep, hi - keep


def iter_windows(
    path: str | Path,
    finders: Sequence[MarkerFinder],
    *,
    segment: int = SEGMENT_BYTES,
    ahead: SearchAhead | None = None,
) -> Iterator[Window]:
    """The windows of the log at `path` in order, numbered, each with the marker lines of every finder found
    ahead of time (`Window.marked`), in one search for all their markers.

    A plain file searched by rg comes in windows of rg's making (`segment` is not used). Otherwise polars
    searches the next window on its own thread while the caller works on one. A compressed buffer holds
    LOOKAHEAD_BYTES after its scan region, so a message that starts in the region can be read whole; with a
    `segment` smaller than that, buffers accumulate reads.
    """
    path = Path(path)
    readers = _Readers(finders)
    plain = compression_of(path) is None
    binary = ripgrep_binary() if plain else None
    searched = _ripgrep_windows(path, readers, binary, ahead) if binary is not None else None
    if searched is not None:
        yield from searched
        return
    segment = max(1, segment)
    raw = _stream_windows(path, segment, LOOKAHEAD_BYTES)
    line, pending = 1, None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="oomlab-scan") as pool:
        try:
            for window in raw:
                started = (window, readers.union.search(window.buf, window.lo, window.hi, pool))
                if pending is not None:
                    done, line = readers.marked(*pending, line)
                    yield done
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
        self.finders = list({f.markers: f for f in finders}.values())  # one per set of markers
        self.union = MarkerFinder([m for f in self.finders for m in f.markers])

    def marked(self, window: Window, search: Search, line: int) -> tuple[Window, int]:
        """`window` (whose first line is number `line`) with its marks, and the number of the line after it."""
        marks, pos, at = _numbered(window.buf, search.lines(), window.lo, line)
        found = self.found(window.buf, marks)
        return replace(window, line=line, found=found), at + count_newlines(window.buf, pos, window.hi)

    def found(self, buf: Buffer, marks: list[Mark]) -> dict[tuple[bytes, ...], tuple[Mark, ...]]:
        """The marks (numbered lines holding some finder's marker) of each finder."""
        number = dict(marks)
        starts = self.union.split(buf, [start for start, _ in marks], self.finders)
        return {
            finder.markers: tuple((start, number[start]) for start in lines)
            for finder, lines in zip(self.finders, starts, strict=True)
        }


@dataclass(frozen=True)
class _Started:
    """rg under way on a plain log."""

    view: FileView
    lines: _MarkedLines
    search: RipgrepSearch


@dataclass
class SearchAhead:
    """rg's search of a plain log started before its scan (`oomlab ingest` starts it on its first file before
    DuckDB loads, so rg's pass runs beside the imports instead of after them). The scan that reads the same
    file (as it is now: a file rewritten since is searched again) for the same markers takes it up
    (`iter_windows(..., ahead=)`); `close` ends it when none did."""

    key: tuple[object, ...]
    started: _Started | None

    def take(self, key: tuple[object, ...]) -> _Started | None:
        """The search, when it is the one for `key` and not taken yet."""
        if key != self.key or self.started is None:
            return None
        started, self.started = self.started, None
        return started

    def close(self) -> None:
        if self.started is not None:
            self.started.search.close()
            self.started.view.close()
            self.started = None


def search_ahead(path: str | Path, finders: Sequence[MarkerFinder]) -> SearchAhead | None:
    """rg's search of a plain log for `finders`, started now; None for a compressed log, or without rg."""
    path, readers = Path(path), _Readers(finders)
    binary = ripgrep_binary() if compression_of(path) is None else None
    started = _start_ripgrep(path, readers, binary) if binary is not None else None
    return None if started is None else SearchAhead(_ahead_key(path, readers), started)


def _ahead_key(path: Path, readers: _Readers) -> tuple[object, ...]:
    """The file (as it is now: a file rewritten since is searched again) and the markers searched."""
    stat = path.stat()
    return (str(path.resolve()), stat.st_size, stat.st_mtime_ns, tuple(f.markers for f in readers.finders))


def _start_ripgrep(path: Path, readers: _Readers, binary: str) -> _Started | None:
    """rg started on the file; None when the file is empty or this rg cannot run here (another platform's
    binary)."""
    view = FileView(path)
    if len(view) == 0:
        view.close()
        return None
    needles = needles_for([f.markers for f in readers.finders], readers.union.needed, view)
    try:
        search = RipgrepSearch(binary, path, needles.texts)
    except OSError:
        view.close()
        return None
    return _Started(view, _MarkedLines(view, needles, readers), search)


def _ripgrep_windows(path: Path, readers: _Readers, binary: str, ahead: SearchAhead | None) -> Iterator[Window] | None:
    """The windows of a plain file whose marks rg finds (`ahead`'s search, when it is this one); None when this
    rg cannot run here: the log is then searched in-process."""
    if path.stat().st_size == 0:
        return iter(())
    taken = ahead.take(_ahead_key(path, readers)) if ahead is not None else None
    started = taken or _start_ripgrep(path, readers, binary)
    if started is None:
        return None
    return _windows_of(started)


def _windows_of(started: _Started) -> Iterator[Window]:
    """Windows of a plain file, one run per batch of rg's output: each reaches from where the one before
    ended to the start of the batch's last line (rg may report more of that line in its next batch), and the
    last to the end of the file, so together they cover the log and a reader searching a window itself
    (`Window.marked`) numbers its lines right."""
    view, lines, search = started.view, started.lines, started.search
    lo, line = 0, 1
    with contextlib.closing(view), contextlib.closing(search):
        for batch in search:
            # A log still being written may have grown since it was opened: rg's hits past the view are
            # left for the next ingest (the file's hash will have changed by then).
            lines.add(hit for hit in batch if hit[0] < len(view))
            if lines.open_start > lo:
                hi = lines.open_start
                yield from _read_windows(view, lo, hi, line, lines.take(), hi)
                lo, line = hi, lines.open_number
        lines.close()
        if lo < len(view):
            yield from _read_windows(view, lo, len(view), line, lines.take(), len(view))


def _read_windows(
    view: FileView, lo: int, hi: int, line: int, found: Mapping[tuple[bytes, ...], tuple[Mark, ...]], done: int
) -> Iterator[Window]:
    """[lo, hi) of the file (line `lo` numbered `line`, `found` its marks by file offset) as windows of bytes
    read from it, at most SEGMENT_BYTES each (cut at line ends but inside a line longer than _MAX_LINE), each
    with LOOKAHEAD_BYTES on both sides for messages that reach past it. `done` of the file is read once they
    are dealt with."""
    while lo < hi:
        cut = view.find(b"\n", min(lo + SEGMENT_BYTES, hi), min(lo + SEGMENT_BYTES + _MAX_LINE, hi))
        upto = cut + 1 if cut >= 0 else min(hi, lo + SEGMENT_BYTES + _MAX_LINE)
        base = max(0, lo - LOOKAHEAD_BYTES)
        buf = view.read(base, upto + LOOKAHEAD_BYTES)
        if len(buf) < upto - base:  # the file shrank under the read: the rest is not there to scan
            return
        marks = {key: tuple((at - base, n) for at, n in ms if lo <= at < upto) for key, ms in found.items()}
        yield Window(buf, base, lo - base, upto - base, line, marks, (upto if upto < hi else done) / len(view))
        line += count_newlines(buf, lo - base, upto - base)
        lo = upto


class _MarkedLines:
    """The lines that hold each reader's markers, from rg's needle hits in file order. The line of the latest
    hit stays open (more of its hits may come) until a hit on a later line, or `close`."""

    def __init__(self, buf: Buffer, needles: Needles, readers: _Readers) -> None:
        self.buf, self.needles, self.readers = buf, needles, readers.finders
        self.closed: list[list[Mark]] = [[] for _ in self.readers]
        self.open_number, self.open_start = 0, 0
        self.holding: set[int] = set()  # the readers whose markers the open line holds

    def add(self, hits: Iterable[Hit]) -> None:
        """Check hits (in order) for the markers that hold them."""
        for at, number, needle in hits:
            if number != self.open_number:
                self.close()
                self.open_number, self.open_start = number, self.buf.rfind(b"\n", 0, at) + 1
            self.needles.add_holders(self.buf, at, needle, self.holding)

    def close(self) -> None:
        """No more hits on the open line will come."""
        for reader in self.holding:
            self.closed[reader].append((self.open_start, self.open_number))
        self.holding = set()

    def take(self) -> dict[tuple[bytes, ...], tuple[Mark, ...]]:
        """Each reader's marks of the lines closed since the last take."""
        found = {finder.markers: tuple(marks) for finder, marks in zip(self.readers, self.closed, strict=True)}
        self.closed = [[] for _ in self.readers]
        return found
