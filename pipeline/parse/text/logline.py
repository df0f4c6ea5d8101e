"""What a log line says about itself: its timestamp, whether it starts a record, whether it claims an OOM."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from ...units import parse_timestamp, to_utc_naive

_MONTHS = {
    m: i
    for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)
}
_LINE_TS = re.compile(
    r"\s*\[?(?:"
    r"(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"|(?P<slash>\d{4}/\d{2}/\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?)"
    r"|(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<hms>\d{2}:\d{2}:\d{2}(?:\.\d+)?)"
    r")"
)
_FRACTION = re.compile(r"([.,])(\d{6})\d+")  # datetime keeps microseconds; logs may print nanoseconds
_JSON_TS_KEYS = ("ts", "time", "timestamp", "@timestamp", "asctime", "datetime", "date")

_LEVEL = r"(?:CRITICAL|ERROR|WARNING|WARN|INFO|DEBUG|TRACE|FATAL|NOTICE)"
# A line that begins a new log record, so it cannot continue the message on the line before.
_RECORD_START = re.compile(
    rf"""\s*(?:[\w.-]+\ +\|\ )?(?:
        \[?\d{{4}}[-/]\d{{2}}[-/]\d{{2}}[T ]\d{{2}}:      # ISO or 2026/11/30 timestamp
      | [A-Z][a-z]{{2}}\ +\d{{1,2}}\ \d{{2}}:\d{{2}}:     # syslog
      | \(?[\w ]*pid=\d+\)?\ *{_LEVEL}\b                  # vLLM worker
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

    Naive times are read in `default_tz` (UTC when None). Syslog times (`Nov 30 01:49:09`) carry no
    year: they get `year`, or the current UTC year when `year` is None.
    """

    def __init__(self, default_tz: str | None = None, year: int | None = None) -> None:
        self.default_tz = default_tz
        self.zone = ZoneInfo(default_tz) if default_tz else None
        self.year = year if year is not None else datetime.now(UTC).year

    def __call__(self, line: str) -> datetime | None:
        """The timestamp `line` starts with, or None."""
        if line.startswith("{"):
            return self._json(line)
        match = _LINE_TS.match(line)
        if match is None:
            return None
        try:
            if match["mon"]:
                return self._syslog(match["mon"], int(match["day"]), match["hms"])
            if match["iso"]:  # the common case, read directly (parse_timestamp tries epochs first)
                moment = datetime.fromisoformat(_FRACTION.sub(r"\1\2", match["iso"]))
                return to_utc_naive(moment, self.zone)
            return parse_timestamp(_FRACTION.sub(r"\1\2", match["slash"]), self.default_tz)
        except ValueError:
            return None

    def _syslog(self, month: str, day: int, hms: str) -> datetime | None:
        """A syslog `Mon DD HH:MM:SS` in the configured year."""
        if month not in _MONTHS:
            return None
        moment = datetime.fromisoformat(f"{self.year:04d}-{_MONTHS[month]:02d}-{day:02d}T{hms}")
        return to_utc_naive(moment, self.zone)

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
                    return parse_timestamp(record[key], self.default_tz)
                except (ValueError, OverflowError, OSError):
                    return None
        return None
