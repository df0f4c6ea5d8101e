"""What a log line says about itself: its timestamp, whether it starts a record, whether it claims an OOM."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from ...units import parse_timestamp, to_utc_naive
from .releases import Release, release_in

_MONTHS = {
    m: i
    for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)
}
_LEVEL = r"(?:CRITICAL|ERROR|WARNING|WARN|INFO|DEBUG|TRACE|FATAL|NOTICE)"
_HMS = r"\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
# What may stand before a line's timestamp: a Markdown quote (`> `, a pasted log) or emphasis (`**`, a line
# someone made bold in a ticket), a launcher's number for the child whose output the line is (`[1] `), and
# docker compose's service column (`tgi-1  | `: `docker compose logs` prefixes every line with the container
# name and a bar).
_LEAD = r"\s*(?:>\s*)*(?:\*{1,2}|_{1,2})?(?:\[\d{1,4}\]\s+)?(?:[\w.-]{1,120}\s+\|\s)?"
_LINE_TS = re.compile(
    _LEAD + r"\[?(?:"
    r"(?P<iso>\d{4}-\d{2}-\d{2}[T ]" + _HMS + r"(?:Z|[+-]\d{2}:?\d{2})?)"
    r"|(?P<slash>\d{4}/\d{2}/\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?)"
    # TensorRT's sample logger: `[08/03/2022-23:18:05]`, month first (`%m/%d/%Y-%H:%M:%S`).
    r"|(?P<mdy_m>\d{2})/(?P<mdy_d>\d{2})/(?P<mdy_y>\d{4})-(?P<mdy_t>" + _HMS + r")"
    # Without a year (see LineClock): syslog `Nov 30 01:49:09`; vLLM's logger `ERROR 05-12 10:01:02`, after
    # its process tags (`(EngineCore pid=1) `, `(VLLM pid=1) (VllmWorkerProcess pid=2) `); glog and klog
    # `E0902 00:55:35.305769`.
    r"|(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<hms>" + _HMS + r")"
    r"|(?:\([^()\n]{1,80}\)\s*){0,3}(?:" + _LEVEL + r"\s+)?(?P<md_m>\d{2})-(?P<md_d>\d{2}) (?P<md_t>" + _HMS + r")"
    r"|[IWEF](?P<glog_m>\d{2})(?P<glog_d>\d{2}) (?P<glog_t>" + _HMS + r")"
    r")"
)
# A full date at the start of a line, for the year of a log's lines that have none.
_DATED_LINE = re.compile(r"^" + _LEAD + r"\[?(\d{4})[-/]\d{2}[-/]\d{2}[T ]\d{2}:", re.MULTILINE)
_FRACTION = re.compile(r"([.,])(\d{6})\d+")  # datetime keeps microseconds; logs may print nanoseconds
# Every year back to this many before the present comes round to each calendar day (Feb 29 included).
_YEARS_BACK = 8
_JSON_TS_KEYS = ("ts", "time", "timestamp", "@timestamp", "asctime", "datetime", "date")

# A line that begins a new log record, so it cannot continue the message on the line before.
_RECORD_START = re.compile(
    rf"""\s*(?:>\s*)*(?:[\w.-]+\ +\|\ )?(?:               # (a Markdown quote, a compose service)
        \[?\d{{4}}[-/]\d{{2}}[-/]\d{{2}}[T ]\d{{2}}:      # ISO or 2026/11/30 timestamp
      | \[\d{{2}}/\d{{2}}/\d{{4}}-\d{{2}}:               # TensorRT's logger [08/03/2022-23:18:05]
      | [A-Z][a-z]{{2}}\ +\d{{1,2}}\ \d{{2}}:\d{{2}}:     # syslog
      | (?:\([^()\n]{{1,80}}\)\ *){{1,3}}{_LEVEL}\b       # vLLM worker: (VllmWorker rank=1 pid=2) ERROR
      | \(?[\w ]*pid=\d+\)?\ *{_LEVEL}\b                  # ... or its tag cut short
      | \[?{_LEVEL}\b                                      # a level first
      | [IWEF]\d{{4}}\ \d{{2}}:\d{{2}}:                    # glog
      | \d{{2}}-\d{{2}}\ \d{{2}}:\d{{2}}:\d{{2}}            # vLLM 11-30 01:49:09
      | [\w.-]+:\d+:\d+\ \[\d+\]\                          # NCCL host:pid:tid [dev]
      | \{{"                                               # a JSON record
      | Traceback\ \(most\ recent
      | ---[ ]
    )""",
    re.VERBOSE,
)
# Lines that follow an OOM line in the same incident, even as records of their own.
FOLLOW_UP = re.compile(
    r"Failed to CUDA (?:calloc|malloc)|Requested amount of (?:GPU )?memory|OutOfMemory Error in"
    r"|Error Code \d+: OutOfMemory|(?:failed|unable) to allocate \w+ buffer"
    r"|failed to allocate compute buffers"
    r"|error loading model|current device: \d|GGML_ASSERT|Exception raised from|CUDA kernel errors might"
    r"|For debugging consider|Compile with .TORCH_USE_CUDA_DSA|\[\[\{?\{?[Nn]ode"
)
# Wording strong enough that a line matching no known format is kept as a reject, not dropped.
_STRONG = re.compile(
    r"OUT_OF_MEMORY|OutOfMemory|ErrorMemoryAllocation|OOM when allocating|_ALLOC_FAILED"
    r"|Tried to allocate|OUT OF MEMORY"
)
_OOM_PHRASE = re.compile(r"(?i:\bout\s+of\s+memory\b)")
_BENIGN = re.compile(
    r"(?i)\b(?:check(?:s|ed|ing)?|for|avoid(?:s|ed|ing)?|prevent(?:s|ed|ing)?|handl(?:e|es|ed|ing)|detect(?:s|ed|ing)?"
    r"|monitor(?:s|ed|ing)?|no|not|without|possible|potential|risk of|if|in case of|on|against"
    r"|test(?:s|ed|ing)?"
    r"|simulat(?:e|es|ed|ing)|recover(?:y|ing|ed)? from)\s+(?:\w+\s+){0,2}?out\s+of\s+memory\b"
)


def _moment(year: int, month: int, day: int, hms: str) -> datetime:
    """A naive datetime from its parts (`hms` may carry a fraction, to nanoseconds, after `.` or `,`)."""
    time = _FRACTION.sub(r"\1\2", hms)
    return datetime.fromisoformat(f"{year:04d}-{month:02d}-{day:02d}T{time}")


def is_record_start(line: str) -> bool:
    """Whether `line` begins a new log record (timestamp, level, JSON object, traceback)."""
    return _RECORD_START.match(line) is not None


def claims_oom(line: str) -> bool:
    """Whether `line` says memory ran out in words that should not be dropped silently.

    "out of memory" alone counts unless it is plainly about something else ("checking for out of
    memory conditions"); the framework-specific wordings always count.
    """
    if _STRONG.search(line):
        return True
    return _OOM_PHRASE.search(line) is not None and _BENIGN.search(line) is None


class LineClock:
    """Reads the timestamp at the start of a log line as naive UTC.

    Naive times are read in `default_tz` (UTC when None). A time without a year (syslog `Nov 30 01:49:09`,
    vLLM's `11-30 01:49:09`, glog's `E1130 01:49:09`) gets `year` when one is given. Otherwise it gets the
    year of the log's own dated lines (the last one this clock read, or `learn_year` found) unless that puts
    it after `now`; else, where the log names the vLLM it runs (`learn_year` found its version line), the first
    year in which the day is not before that version came out (`releases`): the log cannot be older; else the
    latest year that does not put it after `now`: a log tells of what has happened, so none of its times lies in
    the future. `now` is the present as naive UTC (the clock of the machine when None).
    """

    def __init__(self, default_tz: str | None = None, year: int | None = None, now: datetime | None = None) -> None:
        self.default_tz = default_tz
        self.zone = ZoneInfo(default_tz) if default_tz else None
        self.now = now if now is not None else datetime.now(UTC).replace(tzinfo=None)
        self.fixed_year = year
        self.year = year if year is not None else self.now.year  # for readers of their own yearless stamps
        self.log_year: int | None = None
        # the vLLM the log names, the oldest if several: its lines are not older (used while no line is dated)
        self.release: Release | None = None
        # the year given to a yearless time that nothing in the log placed (no --at, no dated line): a guess, and
        # the release it was the first year after (None when nothing in the log bounded it)
        self.guessed: int | None = None
        self.guessed_after: Release | None = None

    def __call__(self, line: str) -> datetime | None:
        """The timestamp `line` starts with, or None."""
        if line.startswith("{"):
            return self._json(line)
        match = _LINE_TS.match(line)
        if match is None:
            return None
        try:
            return self._read(match)
        except ValueError:
            return None

    def learn_year(self, text: str) -> None:
        """Take the year of the first line of `text` that starts with a full date, unless one is known; while none
        is, also the vLLM version that `text` states (`learn_release`)."""
        if self.log_year is None and (match := _DATED_LINE.search(text)) is not None:
            self.log_year = int(match[1])
        if self.log_year is None:
            self.learn_release(text)

    def learn_release(self, text: str) -> None:
        """Take the release of the vLLM that a version line of `text` names (`releases.release_in`), unless an
        older one is known: the log's yearless lines are not older than it."""
        release = release_in(text)
        if release is not None and (self.release is None or release.on < self.release.on):
            self.release = release

    def learn_from(self, other: LineClock) -> None:
        """Take what `other`, a clock of the same log, learned of its year: its year, unless this one knows one,
        and its release, unless this one knows an older."""
        if self.log_year is None:
            self.log_year = other.log_year
        if other.release is not None and (self.release is None or other.release.on < self.release.on):
            self.release = other.release

    @property
    def guess_reason(self) -> str:
        """Why the guessed year was taken, for the note that says it was guessed."""
        if self.guessed_after is None:
            return "nothing in the log says which"
        return f"the earliest not before {self.guessed_after}"

    def _read(self, match: re.Match[str]) -> datetime | None:
        """The moment a match of _LINE_TS states."""
        if match["iso"]:  # the common case, read directly (parse_timestamp tries epochs first)
            moment = datetime.fromisoformat(_FRACTION.sub(r"\1\2", match["iso"]))
            return self._dated(to_utc_naive(moment, self.zone))
        if match["slash"]:
            moment = parse_timestamp(_FRACTION.sub(r"\1\2", match["slash"]), self.default_tz)
            return None if moment is None else self._dated(moment)
        if match["mdy_y"]:
            moment = _moment(int(match["mdy_y"]), int(match["mdy_m"]), int(match["mdy_d"]), match["mdy_t"])
            return self._dated(to_utc_naive(moment, self.zone))
        if match["mon"]:
            month = _MONTHS.get(match["mon"])
            return None if month is None else self._yearless(month, int(match["day"]), match["hms"])
        if match["md_m"]:
            return self._yearless(int(match["md_m"]), int(match["md_d"]), match["md_t"])
        return self._yearless(int(match["glog_m"]), int(match["glog_d"]), match["glog_t"])

    def _dated(self, moment: datetime) -> datetime:
        """`moment`, read from a line with a full date: its year is the log's from now on."""
        self.log_year = moment.year
        return moment

    def _yearless(self, month: int, day: int, hms: str) -> datetime | None:
        """`month`-`day` `hms` in the year the class docstring says; None if no year has that day."""
        if self.fixed_year is None and self.log_year is None and self.release is not None:
            released = self.release.on
            for year in range(released.year, self.now.year + 2):  # next year's too: see _years
                moment = self._on(year, month, day, hms)
                if moment is not None and moment <= self.now and (year, month, day) >= released.timetuple()[:3]:
                    self.guessed, self.guessed_after = year, self.release
                    return moment
        for year in self._years():
            moment = self._on(year, month, day, hms)
            if moment is not None and (self.fixed_year is not None or moment <= self.now):
                if self.fixed_year is None and year != self.log_year:
                    self.guessed, self.guessed_after = year, None
                return moment
        return None

    def _on(self, year: int, month: int, day: int, hms: str) -> datetime | None:
        """`month`-`day` `hms` of `year` as naive UTC; None where `year` has no such day (Feb 29 of a common year)."""
        try:
            return to_utc_naive(_moment(year, month, day, hms), self.zone)
        except ValueError:
            return None

    def _years(self) -> list[int]:
        """The years a yearless time may have, the first that fits wins."""
        if self.fixed_year is not None:
            return [self.fixed_year]
        # From next year down: a zone ahead of UTC can be in next year's January while UTC is not.
        latest = [self.now.year + 1 - back for back in range(_YEARS_BACK + 2)]
        return latest if self.log_year is None else [self.log_year, *latest]

    def _json(self, line: str) -> datetime | None:
        """The timestamp field of a JSON log record."""
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not isinstance(record, dict):
            return None
        for key in _JSON_TS_KEYS:
            if key in record:
                try:
                    moment = parse_timestamp(record[key], self.default_tz)
                except (ValueError, OverflowError, OSError):
                    return None
                return None if moment is None else self._dated(moment)
        return None
