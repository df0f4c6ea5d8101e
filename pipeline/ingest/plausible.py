"""The one bound on times every reader shares: no GPU log was written before 2007 or more than a year ahead.

Request logs apply it in SQL (normalize._check_sql, with the same settings); the readers that build rows in
Python (text logs, telemetry, allocator printouts, engine start-up reports, calendars) call `implausible_time`,
so a row dated year 1 or 9999 is a reject with the reason in every table, never a value that later overflows a
date computation or stretches the data's range to millennia.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TypeVar

from ..load.settings import TS_AHEAD, TS_EARLIEST
from ..records import Reject

T = TypeVar("T")
RAW_LIMIT = 2000
# The reason's words, after the field and the time: the same whether SQL (request logs) or Python wrote it.
IMPLAUSIBLE_TIME = "is before 2007 or more than a year ahead: no GPU log was written then"


def implausible_time(ts: datetime | None, what: str = "ts") -> str | None:
    """The reject reason for a time no GPU log can carry (naive UTC or aware), or None when it is plausible or
    absent."""
    if ts is None:
        return None
    naive = ts.astimezone(UTC).replace(tzinfo=None) if ts.tzinfo is not None else ts
    latest = datetime.now(UTC).replace(tzinfo=None) + TS_AHEAD
    if TS_EARLIEST <= naive <= latest:
        return None
    when = f"{naive.year:04d}-{naive:%m-%d %H:%M:%S}"
    return f"{what}: {when} {IMPLAUSIBLE_TIME}"


def split_plausible(
    items: Iterable[T],
    ts_of: Callable[[T], datetime | None],
    line_of: Callable[[T], int | None],
    raw_of: Callable[[T], str],
) -> tuple[list[T], list[Reject]]:
    """The items whose time is plausible (or absent), and a reject for each other."""
    kept: list[T] = []
    rejects: list[Reject] = []
    for item in items:
        reason = implausible_time(ts_of(item))
        if reason is None:
            kept.append(item)
        else:
            rejects.append(Reject(line_of(item), reason, raw_of(item)[:RAW_LIMIT]))  # type: ignore[arg-type]
    return kept, rejects
