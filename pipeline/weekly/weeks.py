"""ISO weeks in the job's time zone: `2026-W48` <-> [Monday 00:00, next Monday 00:00) as naive UTC."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from ..errors import OomlabError

WEEK_NAME = re.compile(r"^(\d{4})-W(\d{2})$")


@dataclass(frozen=True)
class Week:
    """One ISO week: its name, its Monday, and its bounds as naive UTC in the job's time zone."""

    year: int
    number: int
    timezone: str

    @property
    def name(self) -> str:
        return f"{self.year:04d}-W{self.number:02d}"

    @property
    def monday(self) -> date:
        return date.fromisocalendar(self.year, self.number, 1)

    def _bound(self, day: date) -> datetime:
        local = datetime(day.year, day.month, day.day, tzinfo=ZoneInfo(self.timezone))
        return local.astimezone(UTC).replace(tzinfo=None)

    @property
    def since(self) -> datetime:
        return self._bound(self.monday)

    @property
    def until(self) -> datetime:
        return self._bound(self.monday + timedelta(days=7))

    @property
    def previous(self) -> Week:
        year, number, _ = (self.monday - timedelta(days=7)).isocalendar()
        return Week(year, number, self.timezone)


def parse_week(text: str, timezone: str) -> Week:
    """`2026-W48` as a Week; anything else is an error."""
    match = WEEK_NAME.match(text)
    if match:
        year, number = int(match[1]), int(match[2])
        try:
            date.fromisocalendar(year, number, 1)
        except ValueError:
            pass
        else:
            return Week(year, number, timezone)
    raise OomlabError(f"--week {text!r} is not an ISO week such as 2026-W48")


def last_complete_week(timezone: str, now: datetime | None = None) -> Week:
    """The last ISO week that has ended by `now` (default: the present) in `timezone`."""
    local = (now or datetime.now(UTC)).astimezone(ZoneInfo(timezone))
    year, number, _ = (local.date() - timedelta(days=7)).isocalendar()
    return Week(year, number, timezone)
