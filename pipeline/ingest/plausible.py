"""The one bound on times every reader shares: no GPU log was written before 2007 or from 2100 on (fixed
bounds: the machine's clock decides nothing, `clock_note` only says when the data runs far ahead of it).

Request logs apply it in SQL (normalize._check_sql, with the same settings); the readers that build rows in
Python (text logs, telemetry, allocator printouts, engine start-up reports, calendars) call `implausible_time`,
so a row dated year 1 or 9999 is a reject with the reason in every table, never a value that later overflows a
date computation or stretches the data's range to millennia.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TypeVar

from ..load.settings import TS_AHEAD, TS_EARLIEST, TS_LATEST
from ..records import Reject

T = TypeVar("T")
RAW_LIMIT = 2000
# The reason's words, after the field and the time: the same whether SQL (request logs) or Python wrote it.
IMPLAUSIBLE_TIME = "is before 2007 or after 2099: no GPU log was written then"


def implausible_time(ts: datetime | None, what: str = "ts") -> str | None:
    """The reject reason for a time no GPU log can carry (naive UTC or aware), or None when it is plausible or
    absent."""
    if ts is None:
        return None
    naive = ts.astimezone(UTC).replace(tzinfo=None) if ts.tzinfo is not None else ts
    if TS_EARLIEST <= naive < TS_LATEST:
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


def clock_note(latest: datetime | None, now: datetime | None = None) -> str | None:
    """One line when the newest time ingested lies more than TS_AHEAD after this machine's clock (naive UTC):
    the data is kept and read by its own times; the clock is what to check."""
    now = now if now is not None else datetime.now(UTC).replace(tzinfo=None)
    if latest is None or latest <= now + TS_AHEAD:
        return None
    days = (latest - now).days
    return (
        f"the data runs to {latest:%Y-%m-%d %H:%M} UTC, {days} days after this machine's clock ({now:%Y-%m-%d}): "
        f"every time comes from the data, so nothing changes; check the clock (or the logs' time zone)"
    )
