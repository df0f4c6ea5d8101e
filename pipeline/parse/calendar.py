"""Calendars of scheduled jobs: explicit occurrences (`name,start,end,hosts`) or recurring jobs
(`name,cron,duration_minutes,hosts`), as CSV or JSON, each row checked with its line number."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from cronsim import CronSim, CronSimError

from ..errors import InputError
from ..records import Reject
from ..units import parse_timestamp
from . import bounded
from .compression import open_binary

if TYPE_CHECKING:
    import numpy as np

OCCURRENCE_COLUMNS = frozenset({"name", "start", "end"})
RECURRING_COLUMNS = frozenset({"name", "cron", "duration_minutes"})


@dataclass(frozen=True, slots=True)
class JobWindow:
    """One run of a scheduled job; `hosts` are selectors as written (names or globs), None means every host."""

    line: int
    name: str
    start: datetime
    end: datetime
    hosts: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class JobRule:
    """A recurring job: a 5-field cron and a duration. The cron is in UTC unless it opens with `CRON_TZ=<zone> `
    (a crontab's, a CronJob's or a timer's own zone: parse/cron_files.py, parse/timers.py)."""

    line: int
    name: str
    cron: str
    duration_minutes: float
    hosts: tuple[str, ...] | None


def is_calendar(columns: list[str]) -> bool:
    """True for the columns of either calendar shape."""
    names = {c.strip().lower() for c in columns}
    return names >= OCCURRENCE_COLUMNS or names >= RECURRING_COLUMNS


def parse_hosts(value: object) -> tuple[str, ...] | None:
    """Host selectors as written: `a;b`, `a,b`, `a|b`, `a b` or a JSON list of exact names and shell globs
    (`infer-b-*`, `a10-0[1-3]`); empty or `*` means every host (None). A selector that is no glob raises."""
    if value is None:
        return None
    if isinstance(value, list):
        items = [str(v) for v in value]
    else:
        items = _LIST_ITEM.findall(str(value))
        if len(items) == 1:
            items = _WORD_ITEM.findall(str(value))
    hosts = tuple(h.strip() for h in items if h.strip())
    for selector in hosts:
        check_selector(selector)
    return None if not hosts or hosts == ("*",) else hosts


# A `[...]` class is one piece of an item, so `a10-0[1,3]` stays one selector: separators split only outside it.
_CLASS = r"\[!?\]?[^\]]*\]"
_LIST_ITEM = re.compile(rf"(?:{_CLASS}|[^;,|])+")
_WORD_ITEM = re.compile(rf"(?:{_CLASS}|\S)+")


def check_selector(selector: str) -> None:
    """Raise ValueError for a selector whose meaning as a glob is unclear.

    Selectors are matched by DuckDB's GLOB, which agrees with `fnmatch.fnmatchcase` except where fnmatch
    reads a pattern leniently: a `[` without its `]` (fnmatch: a literal `[`), a backslash (GLOB: an
    escape) and a reversed range such as `[3-1]` (fnmatch drops it). Host names hold none of these, so a
    selector with one is a typo: its row is rejected rather than matched one way or the other.
    """
    if "\\" in selector:
        raise ValueError(f"host selector '{selector}' has a backslash; host names have none")
    start = selector.find("[")
    while start >= 0:
        body = _class_body(selector, start)
        if body is None:
            raise ValueError(f"host selector '{selector}' has a [ without its ]")
        reversed_range = _reversed_range(body)
        if reversed_range:
            raise ValueError(f"host selector '{selector}' has the empty range {reversed_range}")
        start = selector.find("[", start + len(body) + 2)


def _class_body(selector: str, start: int) -> str | None:
    """What lies between the `[` at `start` and its `]` (a `]` first, or after `!`, is a member), or None."""
    first = start + 1 + selector.startswith("!", start + 1)
    first += selector.startswith("]", first)
    end = selector.find("]", first)
    return None if end < 0 else selector[start + 1 : end]


def _reversed_range(body: str) -> str | None:
    """The first range `x-y` of a class body with x after y (`3-1`), found the way fnmatch reads ranges."""
    dash = body.find("-", 2 if body.startswith("!") else 1)
    while 0 <= dash < len(body) - 1:
        if body[dash - 1] > body[dash + 1]:
            return body[dash - 1 : dash + 2]
        dash = body.find("-", dash + 3)
    return None


def read_calendar(path: str | Path, tz: str | None = None) -> Iterator[JobWindow | JobRule | Reject]:
    """Every row of a calendar file as a window, a rule or a reject naming its line."""
    for line, row in _rows(path):
        try:
            yield _row_to_job(line, row, tz)
        except (ValueError, KeyError, CronSimError) as exc:
            yield Reject(line, str(exc).strip("'\""), json.dumps(row, default=str)[:2000])


def calendar_text(path: str | Path) -> str:
    """A calendar file's text (of any kind: parse/cron_files.py and parse/timers.py read theirs here too), read
    within the one bound on a document read whole."""
    with open_binary(path) as handle:
        data = bounded.read_bounded(handle)
    if data is None:
        raise InputError(str(path), f"a calendar over {bounded.bound_text()} is not read")
    return data.decode("utf-8", errors="replace")


def _rows(path: str | Path) -> Iterator[tuple[int, dict[str, object]]]:
    text = calendar_text(path)
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise InputError(str(path), f"invalid JSON calendar: {exc}") from exc
        yield from ((i, item) for i, item in enumerate(items, start=1) if isinstance(item, dict))
        return
    reader = csv.DictReader(io.StringIO(text))
    for row in reader:
        fields = {k.strip().lower(): v for k, v in row.items() if k is not None}
        if row.get(None):  # more fields than the header names: csv.DictReader keeps them under None
            fields[_EXTRA] = [len(reader.fieldnames or []), len(reader.fieldnames or []) + len(row[None])]
        yield reader.line_num, fields


# The key under which _rows notes a row with more fields than its header: [header fields, row fields].
_EXTRA = "\0extra fields"


def _row_to_job(line: int, row: dict[str, object], tz: str | None) -> JobWindow | JobRule:
    if _EXTRA in row:
        header, fields = row[_EXTRA]  # type: ignore[misc]
        raise ValueError(
            f"{fields} fields where the header names {header}: a cron expression with a list (days 3,6) must be "
            f'quoted, e.g. "0 14 * * 3,6", and hosts separated by ";"'
        )
    name = str(row.get("name") or "").strip()
    if not name:
        raise ValueError("missing job name")
    hosts = parse_hosts(row.get("hosts"))
    if row.get("cron"):
        cron = str(row["cron"]).strip()
        CronSim(cron, datetime(2000, 1, 1))  # validates the expression now, not when it is expanded
        return JobRule(line, name, cron, _minutes(row.get("duration_minutes")), hosts)
    start, end = parse_timestamp(row.get("start"), tz), parse_timestamp(row.get("end"), tz)
    if start is None or end is None:
        raise ValueError("an occurrence needs start and end")
    if end < start:
        raise ValueError(f"end {end} is before start {start}")
    return JobWindow(line, name, start, end, hosts)


def _minutes(value: object) -> float:
    minutes = float(str(value))
    if minutes <= 0:
        raise ValueError(f"duration_minutes must be positive, not {value}")
    return minutes


def expand(rule: JobRule, since: datetime, until: datetime) -> Iterator[JobWindow]:
    """The runs of a recurring job that overlap [since, until]; runs that overlap or touch are one window (a
    `* * * * *` rule of five minutes is one long window, not half a million over a year of data).

    The cron fields are read once (CronSim parses them): each day of the range either matches (day of month,
    weekday, month, `L`, `#`) or not, and a matching day fires at its hours x minutes. So the work is one check
    per day plus the runs themselves, merged with numpy: at most 1,440 a day, about 0.1 s for the busiest rule
    over a year (stepping CronSim run by run took 4.4 s per year for `* * * * *`).
    """
    import numpy as np  # here: most ingests expand no rule

    duration = timedelta(minutes=rule.duration_minutes)
    zone, cron = split_zone(rule.cron)
    if zone is None:
        starts = _run_starts(CronSim(cron, since), (since - duration).date(), until.date())
    else:  # the days as the zone counts them, a day wider each side; each start then read as UTC
        first, last = (since - duration - timedelta(days=1)).date(), (until + timedelta(days=1)).date()
        starts = _in_utc(_run_starts(CronSim(cron, since), first, last), zone)
    lo, hi = np.datetime64(since - duration, "m"), np.datetime64(until, "m")
    starts = starts[(starts > lo) & (starts <= hi)]
    if not len(starts):
        return
    length = np.timedelta64(round(rule.duration_minutes * 60_000_000), "us")
    starts = starts.astype("datetime64[us]")
    # runs start in order and last alike: a run opens a new window when it starts after the previous run ends
    opens = np.flatnonzero(np.concatenate(([True], starts[1:] > starts[:-1] + length)))
    closes = np.concatenate((opens[1:] - 1, [len(starts) - 1]))
    for first, last in zip(opens.tolist(), closes.tolist(), strict=True):
        start, end = starts[first].item(), (starts[last] + length).item()
        yield JobWindow(rule.line, rule.name, start, end, rule.hosts)


def split_zone(cron: str) -> tuple[str | None, str]:
    """(zone, schedule) of a stored cron: the zone of its `CRON_TZ=<zone> ` prefix, None for UTC."""
    match = re.match(r"^CRON_TZ=(\S+)\s+(.*)$", cron)
    return (match.group(1), match.group(2)) if match else (None, cron)


def _in_utc(local: np.ndarray, zone: str) -> np.ndarray:
    """Local starts (datetime64[m]) of `zone` as UTC. A start in the hour a spring change skips is taken an hour
    later (cron runs such a job once the clock has jumped); one in the hour an autumn change repeats runs once, at
    its first."""
    import numpy as np
    import polars as pl

    series = pl.Series(local.astype("datetime64[us]"))
    utc = series.dt.replace_time_zone(zone, ambiguous="earliest", non_existent="null")
    later = series.dt.offset_by("1h").dt.replace_time_zone(zone, ambiguous="earliest", non_existent="null")
    utc = utc.fill_null(later).dt.convert_time_zone("UTC").dt.replace_time_zone(None)
    return np.sort(utc.drop_nulls().to_numpy().astype("datetime64[m]"))


def _run_starts(cron: CronSim, first: date, last: date) -> np.ndarray:
    """Every start (datetime64[m]) of the rule on the days first..last, in order."""
    import numpy as np

    day_minutes = np.array(
        sorted(hour * 60 + minute for hour in cron.hours for minute in cron.minutes), dtype="timedelta64[m]"
    )
    days = [
        np.datetime64(day, "m")
        for offset in range((last - first).days + 1)
        if (day := first + timedelta(days=offset)).month in cron.months and cron.match_day(day)
    ]
    if not days:
        return np.array([], dtype="datetime64[m]")
    return (np.array(days, dtype="datetime64[m]")[:, None] + day_minutes[None, :]).ravel()
