"""systemd timer units as calendars (systemd.timer(5), systemd.time(7)): each `OnCalendar=` in force becomes a
`JobRule` whose cron says the same, or a reject naming its line and why cron cannot say it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from cronsim import CronSimError

from ..records import Reject
from .calendar import JobRule, calendar_text
from .cron_files import host_selectors, with_zone

# systemd timers (systemd.time(7)): the calendar shorthands, as full expressions
_SHORTHANDS = {
    "minutely": "*-*-* *:*:00",
    "hourly": "*-*-* *:00:00",
    "daily": "*-*-* 00:00:00",
    "monthly": "*-*-01 00:00:00",
    "weekly": "Mon *-*-* 00:00:00",
    "yearly": "*-01-01 00:00:00",
    "annually": "*-01-01 00:00:00",
    "quarterly": "*-01,04,07,10-01 00:00:00",
    "semiannually": "*-01,07-01 00:00:00",
}
_MONOTONIC = ("OnActiveSec", "OnBootSec", "OnStartupSec", "OnUnitActiveSec", "OnUnitInactiveSec")
_SPAN_UNITS = {
    "us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "": 1.0, "s": 1.0, "sec": 1.0, "second": 1.0,
    "seconds": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hr": 3600.0,
    "hour": 3600.0, "hours": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0, "w": 604800.0,
    "week": 604800.0, "weeks": 604800.0,
}  # fmt: skip


def looks_like_timer(text: str) -> bool:
    """A systemd timer unit: a [Timer] section with a calendar or monotonic trigger."""
    return bool(re.search(r"^\s*\[Timer\]\s*$", text, re.MULTILINE)) and bool(
        re.search(r"^\s*On[A-Za-z]*=", text, re.MULTILINE)
    )


def read_timer(
    path: str | Path, tz: str | None, duration: float | None, host: str | None
) -> Iterator[JobRule | Reject]:
    """Each `OnCalendar=` of a systemd timer as a JobRule (or a Reject). Its job is the unit it starts: `Unit=`,
    else the service of the timer's own name (systemd's rule: backup.timer starts backup.service). A run starts
    up to RandomizedDelaySec (and AccuracySec, where stated) after its calendar time, so its window is that much
    longer than the run."""
    lines = calendar_text(path).splitlines()
    keys = _timer_keys(lines)
    unit = keys.get("Unit", [(0, "")])[-1][1].strip()
    name = re.sub(r"\.(service|target)$", "", unit) if unit else re.sub(r"\.timer(\.\w+)?$", "", Path(path).name)
    delay = 0.0
    for key in ("RandomizedDelaySec", "AccuracySec"):
        for number, value in keys.get(key, []):
            try:
                delay += _span_seconds(value)
            except ValueError as exc:
                yield Reject(number, f"{key}={value}: {exc}; its runs are taken to start on time", value)
    hosts = host_selectors(path, host)
    calendars = _calendars(keys.get("OnCalendar", []))
    if not calendars:
        for key in _MONOTONIC:
            for number, value in keys.get(key, []):
                yield Reject(number, f"{key}={value} runs relative to boot or to its last run, on no calendar", value)
        return
    for number, value in calendars:
        try:
            if duration is None:
                raise ValueError("a timer states no duration: give how long a run lasts with --job-duration MINUTES")
            schedule, zone = timer_cron(value)
            yield JobRule(number, name, with_zone(schedule, zone or tz), duration + delay / 60, hosts)
        except (ValueError, CronSimError) as exc:
            yield Reject(number, f"OnCalendar={value}: {exc}", value)


def _timer_keys(lines: list[str]) -> dict[str, list[tuple[int, str]]]:
    """The [Timer] section's keys, each with its (line, value) in order."""
    keys: dict[str, list[tuple[int, str]]] = {}
    section = ""
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped
        elif section == "[Timer]" and "=" in stripped and not stripped.startswith(("#", ";")):
            key, value = stripped.split("=", 1)
            keys.setdefault(key.strip(), []).append((number, value.strip()))
    return keys


def _calendars(values: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The OnCalendar= values in force: an empty one clears those before it (systemd.timer(5))."""
    kept: list[tuple[int, str]] = []
    for number, value in values:
        kept = [] if not value else [*kept, (number, value)]
    return kept


def _span_seconds(value: str) -> float:
    """A systemd time span (`30min`, `1h 30min`, `90`) in seconds."""
    total = 0.0
    for amount, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([A-Za-z]*)", value):
        if unit not in _SPAN_UNITS:
            raise ValueError(f"unknown time span {value!r}")
        total += float(amount) * _SPAN_UNITS[unit]
    return total


_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def timer_cron(value: str) -> tuple[str, str | None]:
    """(5-field cron, zone or None) of an OnCalendar= expression `[weekdays] [[year-]month-day] [hour:minute[:second]]
    [zone]`, where cron can say it: seconds 0, any year, no `~` (last days of a month)."""
    words = _SHORTHANDS.get(value.strip().lower(), value).split()
    zone = None
    if words and not re.search(r"[-:*]", words[-1]) and words[-1].lower()[:3] not in _DAYS:
        zone = words.pop()
    weekdays = words.pop(0) if words and words[0][:3].lower() in _DAYS else "*"
    date = next((w for w in words if "-" in w and ":" not in w), "*-*-*")
    time = next((w for w in words if ":" in w), "00:00:00")
    if "~" in date:
        raise ValueError("the last days of a month (~) have no cron form")
    parts = date.split("-")
    year, month, day = parts if len(parts) == 3 else ("*", *parts)
    if year != "*":
        raise ValueError("a year of its own has no cron form")
    hour, minute, *second = time.split(":")
    if second and second[0] not in ("0", "00"):
        raise ValueError("runs at seconds other than :00, which cron cannot say")
    if weekdays != "*" and day != "*":
        raise ValueError("a weekday and a day of the month together (systemd: both; cron: either) have no cron form")
    fields = [_cron_field(minute, 59), _cron_field(hour, 23), _cron_field(day, 31), _cron_field(month, 12)]
    return " ".join([*fields, _cron_days(weekdays)]), zone


def _cron_field(text: str, highest: int) -> str:
    """One systemd component (`*`, `5`, `1..5`, `0/15`, `*/2`, lists of them) as a cron field."""
    out = []
    for item in text.split(","):
        item = item.replace("..", "-")
        if "/" in item:
            start, step = item.split("/", 1)
            item = f"{start}/{step}" if start == "*" or "-" in start else f"{int(start)}-{highest}/{int(step)}"
        elif item != "*":
            item = "-".join(str(int(number)) for number in item.split("-"))
        out.append(item)
    return ",".join(out)


def _cron_days(text: str) -> str:
    """systemd weekdays (`Mon..Fri`, `Sat,Sun`, full names) as a cron day-of-week field."""
    if text == "*":
        return "*"
    return ",".join("-".join(day[:3].lower() for day in item.split("..")) for item in text.split(","))
