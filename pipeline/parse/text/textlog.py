"""Find and parse every OOM message in a text log (plain, gzip, xz or zstd), with its line and timestamp.

The log is never walked line by line in Python: `textscan` finds the lines that hold an OOM marker
(`OOM_MARKERS`) and numbers them; only those lines, and the few around them that belong to the same
message, are decoded and parsed here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfoNotFoundError

from ...errors import InputError, ParseError
from ...records import OomMessage, Reject, TextOom
from ..compression import READ_ERRORS
from ..oom.clean import clean_message_text
from ..oom.message import OOM_MARKERS, analyse_oom_text
from .logline import FOLLOW_UP, LineClock, claims_oom, is_record_start
from .textscan import SEGMENT_BYTES, MarkerFinder, Window, iter_windows

REJECT_REASON = "text mentions out of memory but matches no known OOM message format"
MAX_MESSAGE_LINES = 64  # a message continues over at most this many lines
MAX_MESSAGE_BYTES = 32 << 10  # ... and this many bytes (less than textscan.LOOKAHEAD_BYTES)
LOOK_BEHIND = 2  # earlier lines a message may reach back to (see _Scanner._reach_back)
RAW_LIMIT = 2000

_FINDER = MarkerFinder(OOM_MARKERS)
_EXCEPTION_NAME = re.compile(r"(?:Error|Exception)\s*:?\s*$")
_TRAILING_NAME = re.compile(r"[\w.]*$")
_EXCEPTION_HEAD = re.compile(r"[\w.]*(?:Error|Exception)\s*:?\s*")


def scan_text_log(
    path: str | Path,
    *,
    default_tz: str | None = None,
    year: int | None = None,
    chunk_size: int = SEGMENT_BYTES,
    on_window: Callable[[Window], object] | None = None,
    also: Sequence[MarkerFinder] = (),
) -> Iterator[TextOom | Reject]:
    """Every OOM message in the text log at `path`, in order, or a Reject for OOM-looking text that
    matches no known format.

    `TextOom.line` is the 1-based line where the message starts; `TextOom.ts` the timestamp at the
    start of that line (ISO 8601, `2026/11/30 01:49:09.001`, syslog `Nov 30 01:49:09`, or the `ts`
    field of a JSON record) as naive UTC: naive times are read in `default_tz` (UTC when None), and
    syslog times, which have no year, get `year` (the current UTC year when None). `chunk_size` is
    the unit of work (tests make it small to put messages across chunk boundaries). `on_window` sees every
    window of the log first, so other readers (vLLM's start-up report) share the one decompression; the lines
    holding the markers of `also` (theirs) are found by the same search (`Window.marked`).
    """
    try:
        clock = LineClock(default_tz, year)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InputError(
            str(path), f"unknown time zone {default_tz!r}", hint="pass an IANA zone name such as Europe/Berlin"
        ) from exc
    try:
        scanner = _Scanner(clock)
        for window in iter_windows(path, [_FINDER, *also], segment=chunk_size):
            if on_window is not None:
                on_window(window)
            yield from scanner.scan(window)
    except READ_ERRORS as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(
            str(path), f"cannot read the log: {reason}", hint="check that the file is complete and not corrupted"
        ) from exc


@dataclass
class _Message:
    """A message being assembled: its lines (decoded), where they lie, and what they parse to."""

    start: int  # offset of its first line in the window's buffer
    end: int  # offset just after its last line
    lines: list[str]
    oom: OomMessage | None = None
    state: str = "none"

    def analyse(self) -> None:
        """Parse the joined lines again."""
        self.oom, self.state, _ = _analyse("\n".join(self.lines))


def _analyse(text: str) -> tuple[OomMessage | None, str, int]:
    """analyse_oom_text, with a message that cannot be decoded treated as no message."""
    try:
        return analyse_oom_text(text)
    except ParseError:
        return None, "none", -1


@dataclass
class _Scanner:
    """Walks the marker lines of successive windows, keeping what was consumed."""

    clock: LineClock
    consumed: int = 0  # absolute offset up to which lines belong to messages already reported
    _window: Window | None = field(default=None, repr=False)

    def scan(self, window: Window) -> Iterator[TextOom | Reject]:
        """The messages that start on the marker lines of `window`."""
        self._window = window
        for hit, line in window.marked(_FINDER):
            if window.base + hit < self.consumed:
                continue
            found = self._message_at(hit, line)
            if found is not None:
                yield found

    def _line_end(self, start: int) -> int:
        """The offset after the line that starts at `start` (its newline included)."""
        window = self._window
        assert window is not None
        end = window.buf.find(b"\n", start, len(window.buf))
        return len(window.buf) if end < 0 else end + 1

    def _text(self, start: int, end: int) -> str:
        """The decoded line at buf[start:end], without its line break."""
        assert self._window is not None
        return self._window.buf[start:end].decode("utf-8", errors="replace").rstrip("\r\n")

    def _message_at(self, hit: int, line: int) -> TextOom | Reject | None:
        """The message whose marker is on the line at `hit`; a Reject; or None for a weak marker."""
        assert self._window is not None
        end = self._line_end(hit)
        first = self._text(hit, end)
        oom, state, _ = _analyse(first)
        if oom is not None and state == "ended" and _ends_sentence(first) and is_record_start(first):
            self.consumed = self._window.base + end  # the common case: one whole log record
            return TextOom(line, self.clock(first), oom)
        if oom is None and not claims_oom(first):
            return None  # a weak marker ("KV cache memory") on a line that is not an OOM message
        msg = _Message(hit, end, [first], oom, state)
        self._grow(msg)
        line -= self._reach_back(msg)
        self.consumed = self._window.base + msg.end
        if msg.oom is None:
            return Reject(line, REJECT_REASON, first[:RAW_LIMIT]) if claims_oom(first) else None
        return TextOom(line, self.clock(msg.lines[0]), msg.oom)

    def _next_line(self, start: int) -> tuple[str, int] | None:
        """The decoded line at `start` and the offset after it; None at the end of the buffer."""
        assert self._window is not None
        if start >= len(self._window.buf):
            return None
        end = self._line_end(start)
        return self._text(start, end), end

    def _room(self, msg: _Message) -> bool:
        """Whether the message may take one more line."""
        return len(msg.lines) < MAX_MESSAGE_LINES and msg.end - msg.start < MAX_MESSAGE_BYTES

    def _grow(self, msg: _Message) -> None:
        """Add the lines that continue the message: until it ends, a new record, or a blank line."""
        while self._room(msg) and not _finished(msg):
            nxt = self._next_line(msg.end)
            if nxt is None:
                return
            text, end = nxt
            if not text.strip():
                if not self._follow_up_after_blank(msg, end):
                    return
            elif msg.oom is not None and FOLLOW_UP.search(text):
                self._take(msg, text, end)
            elif msg.state == "complete" or is_record_start(text) or not self._continues(msg, text):
                return
            else:
                self._take(msg, text, end)

    def _take(self, msg: _Message, text: str, end: int) -> None:
        """Append a line to the message and parse it again."""
        msg.lines.append(text)
        msg.end = end
        msg.analyse()

    def _follow_up_after_blank(self, msg: _Message, after_blank: int) -> bool:
        """Take a blank line and the follow-up after it (NCCL separates its WARN lines); False if none."""
        nxt = self._next_line(after_blank) if msg.oom is not None else None
        if nxt is None or not FOLLOW_UP.search(nxt[0]):
            return False
        msg.lines.append("")
        self._take(msg, nxt[0], nxt[1])
        return True

    def _continues(self, msg: _Message, text: str) -> bool:
        """Whether `text` continues the message rather than starting another OOM message.

        A line that holds no known message continues. One that does continues only when the two
        are one message split in two: the joined text starts the message in the earlier lines, the
        earlier lines end in an exception name (`torch.OutOfMemoryError`), or they named the error
        without any numbers and this line brings them.
        """
        alone, _, _ = _analyse(text)
        if alone is None:
            return True
        if msg.oom is None:
            return _split_head(msg.lines, text)
        return alone.framework == msg.oom.framework and _bare(msg.oom) and not _bare(alone)

    def _previous_line(self, start: int) -> tuple[str, int] | None:
        """The line before the one at `start`, with its offset; None if blank or already reported."""
        assert self._window is not None
        floor = max(0, self.consumed - self._window.base)
        if start <= floor:
            return None
        prev_start = max(floor, self._window.buf.rfind(b"\n", floor, start - 1) + 1)
        text = self._text(prev_start, start)
        return (text, prev_start) if text.strip() else None

    def _reach_back(self, msg: _Message) -> int:
        """Prepend up to LOOK_BEHIND earlier lines that belong to the message; return how many.

        A line before one that does not start a record is taken when the message does not parse
        without it, when it changes the framework or adds fields (the context `tensorview` or
        `RuntimeError:` line), or when it is the first part of a fixed-width wrap (same length).
        """
        moved = 0
        while moved < LOOK_BEHIND and not is_record_start(msg.lines[0]):
            prev = self._previous_line(msg.start)
            if prev is None:
                break
            text, start = prev
            oom, state, _ = _analyse("\n".join([text, *msg.lines]))
            wrapped = len(text) == len(msg.lines[0]) and len(msg.lines) > 1
            if oom is None or not (wrapped or _better(oom, msg.oom)):
                break
            msg.start, msg.oom, msg.state = start, oom, state
            msg.lines.insert(0, text)
            moved += 1
        return moved


def _split_head(lines: list[str], text: str) -> bool:
    """Whether `lines` (no message yet) and the message on `text` are one message wrapped: its anchor
    starts in `lines`, or `lines` end in its exception name, whole or cut (`torch.OutOfMemory|Error:`)."""
    before = clean_message_text("\n".join(lines))
    joined = clean_message_text("\n".join([*lines, text]))
    _, _, anchor_at = _analyse(joined)
    if anchor_at < 0:
        return False
    if anchor_at < len(before) or _EXCEPTION_NAME.search(before):
        return True
    name = _TRAILING_NAME.search(before).group() + joined[len(before) : anchor_at]  # type: ignore[union-attr]
    return _EXCEPTION_HEAD.fullmatch(name) is not None


def _finished(msg: _Message) -> bool:
    """Whether the message is known to be over: its closing words seen, at the end of a sentence
    (a wrapped message can reach its closing words with the rest of their sentence on the next line)."""
    return msg.state == "ended" and _ends_sentence(msg.lines[-1])


def _ends_sentence(text: str) -> bool:
    """Whether `text` ends the way a sentence or a closing bracket does."""
    return text.rstrip().endswith((".", ")", "]", '"', "'", "}"))


def _better(new: OomMessage, old: OomMessage | None) -> bool:
    """Whether `new` says more than `old`: a message where there was none, another framework, more fields."""
    if old is None:
        return True
    return new.framework != old.framework or _count(new) > _count(old)


def _count(oom: OomMessage) -> int:
    """How many numeric fields the message states."""
    return sum(getattr(oom, name) is not None for name in _NUMERIC_FIELDS) + len(oom.other_processes)


def _bare(oom: OomMessage) -> bool:
    """Whether the message states no number at all (only that memory ran out)."""
    return all(getattr(oom, name) is None for name in _NUMERIC_FIELDS) and not oom.other_processes


_NUMERIC_FIELDS = tuple(
    name for name in OomMessage.__dataclass_fields__ if name not in ("framework", "message", "other_processes")
)
