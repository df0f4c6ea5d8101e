"""Find and parse every OOM message in a text log (plain, gzip, xz or zstd), with its line and timestamp.

The log is never walked line by line in Python: `textscan` finds the lines that hold an OOM marker
(`OOM_MARKERS`) and numbers them; only those lines, and the few around them that belong to the same
message, are decoded and parsed here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from zoneinfo import ZoneInfoNotFoundError

from ...errors import InputError, ParseError
from ...records import OomMessage, Reject, TextOom
from ..compression import READ_ERRORS
from ..oom.clean import clean_message_text
from ..oom.message import OOM_MARKERS, Reading, analyse_oom, heads_message, opens_message
from .logline import FOLLOW_UP, LineClock, claims_oom, is_record_start
from .mention import mentions_only
from .request_line import request_fields
from .textscan import LINE_TEXT_BYTES, SEGMENT_BYTES, MarkerFinder, SearchAhead, Window, iter_windows, line_text

REJECT_REASON = "text mentions out of memory but matches no known OOM message format"
MAX_MESSAGE_LINES = 64  # a message continues over at most this many lines
MAX_MESSAGE_BYTES = 32 << 10  # ... and this many bytes (less than textscan.LOOKAHEAD_BYTES)
LOOK_BEHIND = 2  # earlier lines a message may reach back to (see _Scanner._reach_back)
# Lines above a message searched for the request it failed (`_Scanner._request_before`): a traceback stands
# between the two, as long as a message may be.
REQUEST_REACH = MAX_MESSAGE_LINES
RAW_LIMIT = 2000
# Lines that may stand between a message and the same failure relayed by another layer (see `_is_echo`): a
# relay logs it as its next record, after at most a blank line and a line of its own ("..." in a paste).
ECHO_GAP = 2
# A handler's line printing the error, then the traceback that ends in it (`❌ error: CUDA out of memory ...`,
# `Traceback (most recent call last):`, frames, `torch.OutOfMemoryError: CUDA out of memory ...`): one failure.
# A traceback's lines are counted back from its last line up to this many (Python's default recursion limit
# prints at most about a thousand frames, each a `File` line and its code).
TRACEBACK_REACH = 2000
_TRACEBACK_LINE = re.compile(
    r"^\s*(?:Traceback \(most recent call last\):|File \"[^\"]*\", line \d+|[\^~]+\s*$"
    r"|\[Previous line repeated \d+ more times?\])|^\s{2,}\S"
)
# Lines after a line that opens a message (`opens_message`) within which its out-of-memory words come: the
# known layouts put them on the next line or two (DeepSpeed's Free:/Total:, FlashInfer's Buffer overflow).
HEAD_REACH = 3
YEAR_PROBE_BYTES = 64 << 10  # where a window is looked at for a dated line or a vLLM version, for lines without a year

OOM_FINDER = MarkerFinder(OOM_MARKERS)
_EXCEPTION_NAME = re.compile(r"(?:Error|Exception)\s*:?\s*$")
_TRAILING_NAME = re.compile(r"[\w.]*$")
_EXCEPTION_HEAD = re.compile(r"[\w.]*(?:Error|Exception)\s*:?\s*")
_PROCESS_TAG = re.compile(r"\([^()\n]*?\bpid=(\d+)[^()\n]*\)")  # vLLM's `(EngineCore pid=1)`, Ray's `(pid=1)`


def log_clock(path: str | Path, default_tz: str | None = None, year: int | None = None) -> LineClock:
    """The clock of a text log's lines; InputError for a zone that is not one."""
    try:
        return LineClock(default_tz, year)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InputError(
            str(path), f"unknown time zone {default_tz!r}", hint="pass an IANA zone name such as Europe/Berlin"
        ) from exc


def scan_text_log(
    path: str | Path,
    *,
    default_tz: str | None = None,
    year: int | None = None,
    chunk_size: int = SEGMENT_BYTES,
    on_window: Callable[[Window], object] | None = None,
    also: Sequence[MarkerFinder] = (),
    ahead: SearchAhead | None = None,
    clock: LineClock | None = None,
) -> Iterator[TextOom | Reject]:
    """Every OOM message in the text log at `path`, in order, or a Reject for OOM-looking text that
    matches no known format.

    `TextOom.line` is the 1-based line where the message starts; `TextOom.ts` the timestamp at the
    start of that line (ISO 8601, `2026/11/30 01:49:09.001`, TensorRT's `[08/03/2022-23:18:05]`, syslog
    `Nov 30 01:49:09`, vLLM's `ERROR 11-30 01:49:09`, glog's `E1130 01:49:09.5`, or the `ts` field of a JSON
    record) as naive UTC: naive times are read in `default_tz` (UTC when None), and times without a year
    get `year`, or else the year of the log's dated lines or the latest that is not in the future
    (`LineClock`). The same failure reported again right after by another layer is one message (`_Echoes`).
    `chunk_size` is the unit of work (tests make it small to put messages across chunk boundaries).
    `on_window` sees every window of the log first, so other readers (vLLM's start-up report) share the one
    decompression; the lines holding the markers of `also` (theirs) are found by the same search
    (`Window.marked`); `ahead` is that search, when it was started before (`textscan.search_ahead`). `clock`, when
    given, dates the lines instead of one made of `default_tz` and `year` (its `guessed` then tells the caller
    whether a year was guessed); it has learned from each window's head before `on_window` sees the window.
    """
    clock = clock if clock is not None else log_clock(path, default_tz, year)
    try:
        scanner, echoes = _Scanner(clock), _Echoes()
        for window in iter_windows(path, [OOM_FINDER, *also], segment=chunk_size, ahead=ahead):
            scanner.learn(window)  # first: `on_window`'s readers may date lines by what the clock learns
            if on_window is not None:
                on_window(window)
            for found in scanner.scan(window):
                yield from echoes.add(found)
        yield from echoes.close()
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
    follow: re.Pattern[str] | None = None  # lines reporting the same failure after it (its format's)
    opened: str | None = None  # the framework whose message its first line opens, its words on the next lines

    def analyse(self) -> None:
        """Parse the joined lines again."""
        self.oom, self.state, _, self.follow = _analyse("\n".join(self.lines))


def _analyse(text: str) -> Reading:
    """analyse_oom, with a message that cannot be decoded treated as no message."""
    try:
        return analyse_oom(text)
    except ParseError:
        return Reading(None, "none", -1)


@dataclass(frozen=True)
class _Event:
    """A message found: what is reported, its last line, its first line as written, its cleaned text."""

    found: TextOom
    last: int
    head: str
    text: str
    frames_above: int = 0  # the traceback's lines right above it (`_frames_above`)


@dataclass
class _Scanner:
    """Walks the marker lines of successive windows, keeping what was consumed."""

    clock: LineClock
    consumed: int = 0  # absolute offset up to which lines belong to messages already reported
    _window: Window | None = field(default=None, repr=False)
    # the lines over LINE_TEXT_BYTES read in the current window, cut (`_text`)
    _long_lines: tuple[Window | None, dict[tuple[int, int], str]] = field(default=(None, {}), repr=False)

    def learn(self, window: Window) -> None:
        """Let the clock learn, from the head of `window`, the year of the log's lines without one: the year of its
        dated lines, or the vLLM version it states (`LineClock.learn_year`)."""
        if self.clock.log_year is None:
            self._window = window
            self.clock.learn_year(self._text(window.lo, min(window.hi, window.lo + YEAR_PROBE_BYTES)))

    def scan(self, window: Window) -> Iterator[_Event | Reject]:
        """The messages that start on the marker lines of `window` (after `learn`)."""
        self._window = window
        for hit, line in window.marked(OOM_FINDER):
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
        """The decoded line at buf[start:end], without its line break (a very long one cut: `line_text`, whose
        marker search over it is done once per window: a message's lines are read several times)."""
        window = self._window
        assert window is not None
        if end - start <= LINE_TEXT_BYTES:
            return line_text(window.buf, start, end, OOM_FINDER).rstrip("\r\n")
        if self._long_lines[0] is not window:
            self._long_lines = (window, {})
        cut = self._long_lines[1]
        if (start, end) not in cut:
            cut[(start, end)] = line_text(window.buf, start, end, OOM_FINDER).rstrip("\r\n")
        return cut[(start, end)]

    def _message_at(self, hit: int, line: int) -> _Event | Reject | None:
        """The message whose marker is on the line at `hit`; a Reject; or None for a weak marker."""
        assert self._window is not None
        end = self._line_end(hit)
        first = self._text(hit, end)
        oom, state, _, follow = _analyse(first)
        if oom is not None and _bare(oom) and mentions_only(first):
            return None  # prose naming the error: no failure of its own
        if oom is not None and state == "ended" and _ends_sentence(first) and is_record_start(first):
            found = TextOom(line, self.clock(first), oom, self._request_before(hit))
            frames = self._frames_above(hit)
            self.consumed = self._window.base + end  # the common case: one whole log record
            return _Event(found, line, first, oom.message, frames)
        msg = _Message(hit, end, [first], oom, state, follow)
        if oom is None and not claims_oom(first):
            # A weak marker ("KV cache memory"): a message only where its line opens one, or ends a line
            # the message began on (`... Resource exhausted: Out` / `of memory while trying to allocate`).
            msg.opened = opens_message(first)
            if msg.opened is None and not self._starts_before(msg):
                return None
            line -= len(msg.lines) - 1
        self._grow(msg)
        line -= self._reach_back(msg)
        if msg.oom is None:
            if not claims_oom(first):
                return None  # it opened no message after all: its lines are free for other messages
            self.consumed = self._window.base + msg.end
            return Reject(line, REJECT_REASON, first[:RAW_LIMIT])
        if _bare(msg.oom) and mentions_only(first):
            return None
        request, frames = self._request_before(msg.start), self._frames_above(msg.start)
        self.consumed = self._window.base + msg.end
        last = line + len(msg.lines) - 1
        found = TextOom(line, self.clock(msg.lines[0]), msg.oom, request)
        return _Event(found, last, msg.lines[0], msg.oom.message, frames)

    def _request_before(self, start: int) -> tuple[tuple[str, str], ...]:
        """The request the message at `start` failed, from the nearest request line above it within
        REQUEST_REACH lines, not reaching into an earlier message; () when there is none, or the nearest is
        about a request that succeeded."""
        for _ in range(REQUEST_REACH):
            previous = self._previous_line(start, blank=True)
            if previous is None:
                break
            text, start = previous
            fields = request_fields(text)
            if fields is not None:
                return tuple(fields.items())
        return ()

    def _starts_before(self, msg: _Message) -> bool:
        """Prepend the line before the message's when the two together are a message; whether they are."""
        prev = self._previous_line(msg.start)
        if prev is None:
            return False
        text, start = prev
        reading = _analyse("\n".join([text, *msg.lines]))
        if reading.oom is None:
            return False
        msg.start, msg.oom, msg.state, msg.follow = start, reading.oom, reading.state, reading.follow
        msg.lines.insert(0, text)
        return True

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
            if msg.oom is None and msg.opened is not None and len(msg.lines) > HEAD_REACH:
                return  # its words did not come: it opened no message
            nxt = self._next_line(msg.end)
            if nxt is None:
                return
            text, end = nxt
            if not text.strip():
                if not self._follow_up_after_blank(msg, end):
                    return
            elif self._follows(msg, text):
                self._take(msg, text, end)
            elif msg.state == "complete" or is_record_start(text) or not self._continues(msg, text):
                return
            else:
                self._take(msg, text, end)

    def _follows(self, msg: _Message, text: str) -> bool:
        """Whether `text` reports the failure of the message, even as a record of its own: a known follow-up
        line, or the one its format is followed by (taken once: the next such line is another failure's). Not
        when it says the message's first line again, word for word: that is the same failure once more
        (TensorRT logs one `Error Code 2: OutOfMemory` per allocation)."""
        if msg.oom is None:
            return False
        own = msg.follow is not None and msg.follow.search(text) is not None
        if own and any(msg.follow.search(line) for line in msg.lines[1:]):  # type: ignore[union-attr]
            own = False
        if not own and FOLLOW_UP.search(text) is None:
            return False
        return clean_message_text(text) != clean_message_text(msg.lines[0])

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
        alone = _analyse(text).oom
        if alone is None:
            return True
        if msg.oom is None:
            return alone.framework == msg.opened or _split_head(msg.lines, text)
        return alone.framework == msg.oom.framework and _bare(msg.oom) and not _bare(alone)

    def _previous_line(self, start: int, blank: bool = False) -> tuple[str, int] | None:
        """The line before the one at `start`, with its offset; None if already reported, or blank (unless
        `blank`)."""
        assert self._window is not None
        floor = max(0, self.consumed - self._window.base)
        if start <= floor:
            return None
        prev_start = max(floor, self._window.buf.rfind(b"\n", floor, start - 1) + 1)
        text = self._text(prev_start, start)
        return (text, prev_start) if blank or text.strip() else None

    def _frames_above(self, start: int) -> int:
        """How many lines right above the line at `start` are a traceback's (its header, `File` lines, the code
        under them, `^^^^` marks): the exception's last line repeats what a handler may have printed before it."""
        count = 0
        while count < TRACEBACK_REACH:
            previous = self._previous_line(start)
            if previous is None or not _TRACEBACK_LINE.match(previous[0]):
                break
            count, start = count + 1, previous[1]
        return count

    def _reach_back(self, msg: _Message) -> int:
        """Prepend up to LOOK_BEHIND earlier lines that belong to the message; return how many.

        A line before one that does not start a record is taken when the message does not parse
        without it, when it changes the framework or adds fields (the context `tensorview` or
        `RuntimeError:` line), when it is the first part of a fixed-width wrap (same length), or when
        it heads the message (`heads_message`), then even across a blank line.
        """
        moved = 0
        while moved < LOOK_BEHIND and not is_record_start(msg.lines[0]):
            earlier = self._earlier_lines(msg, LOOK_BEHIND - moved)
            if not earlier:
                break
            text, start = earlier[0]
            reading = _analyse("\n".join([*(line for line, _ in earlier), *msg.lines]))
            wrapped = len(text) == len(msg.lines[0]) and len(msg.lines) > 1
            if reading.oom is None:
                break
            heads = heads_message(text, reading.oom.framework)
            if not (wrapped or heads or _better(reading.oom, msg.oom)):
                break
            msg.start, msg.oom, msg.state, msg.follow = start, reading.oom, reading.state, reading.follow
            msg.lines[:0] = [line for line, _ in earlier]
            moved += len(earlier)
        return moved

    def _earlier_lines(self, msg: _Message, room: int) -> list[tuple[str, int]]:
        """The line before the message's, or a blank line and a line that may head the message before it (the
        message's reading decides: `_reach_back`)."""
        prev = self._previous_line(msg.start, blank=True)
        if prev is None:
            return []
        if prev[0].strip():
            return [prev]
        head = self._previous_line(prev[1]) if room > 1 else None
        framework = msg.oom.framework if msg.oom is not None else ""
        return [head, prev] if head is not None and heads_message(head[0], framework) else []


class _Echoes:
    """Folds into a message the same failure reported again by another layer right after it.

    A router relays its shard's error (`Server error: CUDA out of memory. ...`), a logger re-logs what a
    process printed, a health monitor repeats it, a wrapper error names it and the underlying one follows:
    one failure, one event, on the line where the first report starts. Each message is held until the next
    tells whether it was echoed (`_is_echo`).
    """

    def __init__(self) -> None:
        self.pending: _Event | None = None

    def add(self, found: _Event | Reject) -> list[TextOom | Reject]:
        """What can be reported now that `found` is seen."""
        if isinstance(found, Reject):
            return [*self.close(), found]
        if self.pending is not None and _is_echo(self.pending, found):
            self.pending = _folded(self.pending, found)
            return []
        out = self.close()
        self.pending = found
        return out

    def close(self) -> list[TextOom | Reject]:
        """The message held back, if any."""
        held, self.pending = self.pending, None
        return [] if held is None else [held.found]


def _is_echo(earlier: _Event, later: _Event) -> bool:
    """Whether `later` is `earlier`'s failure reported again by another layer.

    It must follow within ECHO_GAP lines, be read as the same framework, come from the same process (when
    both name theirs: two workers failing alike fail twice) and state the same numbers, or bring the numbers
    of a message that stated none (vLLM's `CUDA out of memory occurred when warming up sampler`, then
    PyTorch's). It must not say the same again in the same layout: the same text, or a line differing from
    the first in one word only (a timestamp, pytest's test name), is that layer reporting another failure.
    """
    first, second = earlier.found.oom, later.found.oom
    gap = later.found.line - earlier.last - 1 - later.frames_above
    if gap > ECHO_GAP or first.framework != second.framework:
        return False
    pids, other_pids = _PROCESS_TAG.findall(earlier.head), _PROCESS_TAG.findall(later.head)
    if pids and other_pids and pids != other_pids:
        return False
    if earlier.text == later.text or _one_word_apart(earlier.head, later.head):
        return False
    return _numbers(first) == _numbers(second) or (_bare(first) and not _bare(second))


def _one_word_apart(line: str, other: str) -> bool:
    """Whether two lines have the same words but at most one."""
    words, other_words = line.split(), other.split()
    return len(words) == len(other_words) and sum(a != b for a, b in zip(words, other_words, strict=True)) <= 1


def _folded(earlier: _Event, later: _Event) -> _Event:
    """The one event of a message and its echo: where the first starts, each number from whichever says it."""
    first, second = earlier.found.oom, later.found.oom
    numbers = {name: getattr(second, name) for name in _NUMERIC_FIELDS if getattr(first, name) is None}
    text = first.message if not _bare(first) or _bare(second) else f"{first.message} {second.message}"
    oom = replace(first, **numbers, other_processes=first.other_processes or second.other_processes, message=text)
    found = TextOom(earlier.found.line, earlier.found.ts or later.found.ts, oom, earlier.found.request)
    return _Event(found, later.last, earlier.head, earlier.text)


def _numbers(oom: OomMessage) -> tuple[object, ...]:
    """Every number the message states."""
    return (*(getattr(oom, name) for name in _NUMERIC_FIELDS), oom.other_processes)


def _split_head(lines: list[str], text: str) -> bool:
    """Whether `lines` (no message yet) and the message on `text` are one message wrapped: its anchor
    starts in `lines`, or `lines` end in its exception name, whole or cut (`torch.OutOfMemory|Error:`)."""
    before = clean_message_text("\n".join(lines))
    joined = clean_message_text("\n".join([*lines, text]))
    anchor_at = _analyse(joined).start
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
