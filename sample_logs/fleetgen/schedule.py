"""Job windows in epoch milliseconds: a small 5-field cron expander (UTC) and explicit occurrences."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from .plan import DAY_MS, Job

_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))  # minute hour day-of-month month day-of-week


def cron_field(text: str, low: int, high: int) -> set[int]:
    """The values one cron field allows: `*`, `*/n`, `a-b`, `a-b/n`, `n` and comma lists of them."""
    values: set[int] = set()
    for part in text.split(","):
        base, _, step = part.partition("/")
        lo, hi = (low, high) if base == "*" else (int(base.split("-")[0]), int(base.split("-")[-1]))
        values.update(range(lo, hi + 1, int(step or 1)))
    return values


def cron_starts(cron: str, start_ms: int, end_ms: int) -> list[int]:
    """Start times (ms) of a cron schedule within [start_ms, end_ms); day-of-week 0 = Sunday."""
    minutes, hours, doms, months, dows = (cron_field(f, *r) for f, r in zip(cron.split(), _RANGES, strict=True))
    day = datetime.fromtimestamp(start_ms // DAY_MS * DAY_MS / 1000, UTC)
    found = []
    while day.timestamp() * 1000 < end_ms:
        if day.day in doms and day.month in months and (day.weekday() + 1) % 7 in dows:
            found += [
                int((day + timedelta(hours=h, minutes=m)).timestamp() * 1000)
                for h in sorted(hours)
                for m in sorted(minutes)
            ]
        day += timedelta(days=1)
    return [t for t in found if start_ms <= t < end_ms]


def job_windows(job: Job, start_ms: int, end_ms: int) -> list[tuple[int, int]]:
    """Every (start, end) window of `job` in ms that begins inside the data's time range."""
    if job.cron:
        return [(t, t + job.duration_min * 60_000) for t in cron_starts(job.cron, start_ms, end_ms)]
    spans = [(int(a.timestamp() * 1000), int(b.timestamp() * 1000)) for a, b in job.occurrences]
    return [(a, b) for a, b in spans if start_ms <= a < end_ms]


def in_windows(ts_ms: np.ndarray, windows: list[tuple[int, int]]) -> np.ndarray:
    """Boolean mask of `ts_ms` falling inside any of the sorted, disjoint `windows`."""
    if not windows:
        return np.zeros(len(ts_ms), dtype=bool)
    bounds = np.array(windows, dtype=np.int64).ravel()
    return np.searchsorted(bounds, ts_ms, side="right") % 2 == 1
