"""The time window every analysis takes: `[since, until)`, either end open, as the database stores time."""

from __future__ import annotations

from datetime import datetime

from ..units import to_utc_naive


def utc_naive(moment: datetime | None) -> datetime | None:
    """The moment as the database stores it: UTC without a zone (naive input is taken as UTC)."""
    return None if moment is None else to_utc_naive(moment)


def window_params(since: datetime | None, until: datetime | None) -> dict[str, datetime | None]:
    """SQL parameters `since` / `until` as naive UTC, the way timestamps are stored."""
    return {"since": utc_naive(since), "until": utc_naive(until)}
