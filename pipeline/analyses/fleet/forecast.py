"""Forecast of water levels: when each device's daily peak of held memory will cross 80 % and 95 %.

The series is the hourly maximum of `reserved_after / device_total` (fct_water_hourly), the level alerts
watch. The trend is fitted on the device's current process lifetime only (a restart or deploy resets the
level, so older lifetimes say nothing about the next days). Daily seasonality: an hour-of-day profile is
estimated from the residuals of a straight line fitted to each earlier lifetime of at least a day, the fit
runs on the series less that profile, and the projection adds the profile's highest hour back, so it
projects the daily peak rather than the daily mean. A trend counts only when its slope is at least
0.5 %/day and three standard errors above zero.

The same fit on `allocated_after / device_total` tells a leak (allocated climbs too) from allocator cache
growth (only reserved climbs: alerts will fire, but PyTorch reuses cached memory before failing).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb
import numpy as np
import polars as pl

from ...load.sql import sql_text
from ..shared import shared
from ..window import window_params
from .card_names import with_device_cards
from .sizing import card_name
from .whole_history import water_hours_once

LEVELS: tuple[float, ...] = (0.80, 0.95)
HORIZON_DAYS = 14
MIN_LIFETIME_HOURS = 12  # a shorter lifetime cannot show a trend apart from the day's traffic
MIN_PROFILE_HOURS = 24  # lifetimes shorter than a day cannot show the hour-of-day profile
MIN_SLOPE_PER_DAY = 0.005
MIN_T_STAT = 3.0
MIN_R2 = 0.3  # a line explaining less than this of the variation is not a trend to project


@dataclass(frozen=True)
class Trend:
    """A straight line over time in days, with its fit statistics."""

    intercept: float
    slope_per_day: float
    slope_se: float
    r2: float
    points: int

    @property
    def rising(self) -> bool:
        """Steep enough, and far enough from zero, to project."""
        return (
            self.slope_per_day >= MIN_SLOPE_PER_DAY
            and self.slope_per_day >= MIN_T_STAT * self.slope_se
            and self.r2 >= MIN_R2
        )


def fit_trend(days: np.ndarray, values: np.ndarray) -> Trend:
    """Least-squares line of `values` against `days`."""
    centred = days - days.mean()
    spread = float((centred**2).sum())
    slope = float((centred * (values - values.mean())).sum() / spread) if spread > 0 else 0.0
    intercept = float(values.mean() - slope * days.mean())
    residual = values - (intercept + slope * days)
    dof = max(len(values) - 2, 1)
    se = float(np.sqrt((residual**2).sum() / dof / spread)) if spread > 0 else float("inf")
    total = float(((values - values.mean()) ** 2).sum())
    r2 = 1.0 - float((residual**2).sum()) / total if total > 0 else 0.0
    return Trend(intercept, slope, se, r2, len(values))


@shared()
def hourly_levels(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """fct_water_hourly over the window, with `days` since each lifetime's first hour and `hod`."""
    water_hours_once(con)
    frame = con.sql(sql_text("q_forecast_hourly"), params=window_params(since, until)).pl()
    start = pl.col("hour").min().over("instance", "gpu_index", "lifetime")
    return frame.with_columns(
        ((pl.col("hour") - start).dt.total_seconds() / 86400).alias("days"),
        pl.col("hour").dt.hour().alias("hod"),
    )


def hour_profile(device: pl.DataFrame, column: str) -> np.ndarray:
    """24 values, mean 0: how much each hour of day sits above the lifetime's trend (zeros without a day
    of history in a lifetime)."""
    residuals = []
    for _, life in device.group_by("lifetime"):
        if life.height < MIN_PROFILE_HOURS:
            continue
        days, values = life["days"].to_numpy(), life[column].to_numpy()
        trend = fit_trend(days, values)
        fitted = trend.intercept + trend.slope_per_day * days
        residuals.append(pl.DataFrame({"hod": life["hod"], "r": values - fitted}))
    profile = np.zeros(24)
    if residuals:
        by_hour = pl.concat(residuals).group_by("hod").agg(pl.col("r").mean())
        profile[by_hour["hod"].to_numpy()] = by_hour["r"].to_numpy()
        profile -= profile.mean()
    return profile


@shared()
def forecast(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """Per device: the current lifetime's trend of the daily peak level and the days and dates until it
    reaches 80 % and 95 % (0: already there; null: not rising, or not within a year)."""
    hourly = hourly_levels(con, since, until)
    if hourly.is_empty():
        return pl.DataFrame()
    rows = [
        _device_forecast(key, device, until)
        for key, device in hourly.group_by("instance", "gpu_index", maintain_order=True)
    ]
    trends: list[Trend | None] = [row.pop("_allocated_trend") for row in rows]  # type: ignore[misc]
    if any(row["growth"] == "allocated" for row in rows):  # only a rising allocated level adds OOMs
        needs = _recent_needs(con, since, until)
        for row, trend in zip(rows, trends, strict=True):
            row["expected_ooms"] = _expected_ooms(row, trend, needs)
    return with_device_cards(con, pl.DataFrame(rows).sort("instance", "gpu_index"))


def _device_forecast(key: tuple, device: pl.DataFrame, until: datetime | None) -> dict[str, object]:
    """One device's forecast row."""
    instance, gpu_index = key
    current = device.filter(pl.col("lifetime") == device["lifetime"].max())
    last_hour: datetime = current["hour"].max()  # type: ignore[assignment]
    as_of = until if until is not None else last_hour + timedelta(hours=1)
    start: datetime = current["hour"].min()  # type: ignore[assignment]
    now_days = (as_of - start).total_seconds() / 86400
    total = int(device["device_total"].max())  # type: ignore[arg-type]
    row: dict[str, object] = {
        "instance": instance,
        "gpu_index": gpu_index,
        "card": card_name(total),
        "device_total": total,
        "model_version": current["model_version"][-1],
        "lifetime_start": start,
        "as_of": as_of,
        "hours_fitted": current.height,
    }
    if current.height < MIN_LIFETIME_HOURS:
        return row | _no_trend("lifetime_too_short")
    projected = _stated_projection(device, current, "held_level", now_days)
    if projected is None:
        return row | _no_trend("no_memory_levels")
    held, held_now = projected
    allocated, allocated_now = _stated_projection(device, current, "allocated_level", now_days) or (None, None)
    row |= {
        "level_now": held_now,
        "slope_per_day": held.slope_per_day,
        "slope_se": held.slope_se,
        "r2": held.r2,
        "allocated_level_now": allocated_now,
        "allocated_slope_per_day": None if allocated is None else allocated.slope_per_day,
        "growth": _growth(held, allocated),
        "reason": None,
    }
    for level in LEVELS:
        days = _days_until(held_now, held, level)
        pct = round(level * 100)
        row[f"days_to_{pct}"] = days
        row[f"date_{pct}"] = None if days is None else as_of + timedelta(days=days)
    return row | {"expected_ooms": 0.0, "_allocated_trend": allocated}


def _stated_projection(
    device: pl.DataFrame, current: pl.DataFrame, column: str, now_days: float
) -> tuple[Trend, float] | None:
    """`_project` over the hours whose requests stated the level; None when none in the current lifetime did (a
    request log may state the card's size and no level, or reserved memory and not what was allocated)."""
    stated = current.filter(pl.col(column).is_not_null())
    if stated.is_empty():
        return None
    return _project(stated, hour_profile(device.filter(pl.col(column).is_not_null()), column), column, now_days)


def _project(current: pl.DataFrame, profile: np.ndarray, column: str, now_days: float) -> tuple[Trend, float]:
    """The deseasonalised trend of `column` and the daily peak it gives at `now_days`."""
    days = current["days"].to_numpy()
    values = current[column].to_numpy() - profile[current["hod"].to_numpy()]
    trend = fit_trend(days, values)
    peak_now = trend.intercept + trend.slope_per_day * now_days + float(profile.max())
    # The projection may not start below what the last day held, nor above the whole card.
    held_lately = float(current[column].tail(24).max())  # type: ignore[arg-type]
    return trend, max(min(peak_now, 1.0), held_lately)


def _growth(held: Trend, allocated: Trend | None) -> str:
    """What rises: 'allocated' (memory kept after requests: a leak or a growing cache of tensors),
    'allocator_cache' (only reserved: PyTorch's cache, reclaimable), 'held' (the held level, in a log that states
    no allocated level (None) to tell those two apart), or 'none'."""
    if allocated is None:
        return "held" if held.rising else "none"
    if allocated.rising:
        return "allocated"
    return "allocator_cache" if held.rising else "none"


def _days_until(level_now: float, trend: Trend, level: float) -> float | None:
    """Days from now until the daily peak reaches `level`; 0 when it already has."""
    if level_now >= level:
        return 0.0
    if not trend.rising:
        return None
    days = (level - level_now) / trend.slope_per_day
    return days if days <= 365 else None


def _no_trend(reason: str) -> dict[str, object]:
    """The forecast columns of a device that gets none."""
    empty: dict[str, object] = {
        "level_now": None,
        "slope_per_day": None,
        "slope_se": None,
        "r2": None,
        "allocated_level_now": None,
        "allocated_slope_per_day": None,
        "growth": None,
        "reason": reason,
    }
    for level in LEVELS:
        empty[f"days_to_{round(level * 100)}"] = None
        empty[f"date_{round(level * 100)}"] = None
    return empty | {"expected_ooms": 0.0, "_allocated_trend": None}


# The need distribution is kept as 1,000 quantiles: enough for shares to 0.1 %, whatever the traffic.
_PROBABILITIES = [(i + 0.5) / 1000 for i in range(1000)]


def _recent_needs(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None) -> pl.DataFrame:
    """Per device: the last week's request rate per day and the quantiles of its requests' peak needs."""
    params = window_params(since, until) | {"probabilities": _PROBABILITIES}
    water_hours_once(con)
    return con.sql(sql_text("q_forecast_request_needs"), params=params).pl()


def _expected_ooms(row: dict[str, object], allocated: Trend | None, needs: pl.DataFrame) -> float:
    """OOMs the allocated trend adds over the horizon if nothing changes: each day, the share of last
    week's requests whose peak need no longer fits the free memory, beyond the share that did not fit
    already, times the request rate. Allocator cache growth adds none (the cache is reclaimed first)."""
    if allocated is None or not allocated.rising:
        return 0.0
    mine = needs.filter((pl.col("instance") == row["instance"]) & (pl.col("gpu_index") == row["gpu_index"]))
    if mine.is_empty() or mine["needs"][0] is None:
        return 0.0
    sample = np.sort(np.asarray([v for v in mine["needs"][0].to_list() if v is not None], dtype=float))
    if sample.size == 0:
        return 0.0
    total = float(row["device_total"])  # type: ignore[arg-type]
    now = float(row["allocated_level_now"])  # type: ignore[arg-type]
    days = np.arange(1, HORIZON_DAYS + 1)
    free = np.clip(total * (1 - (now + allocated.slope_per_day * days)), 0, None)
    free_now = total * (1 - now)
    failing = 1 - np.searchsorted(sample, free, side="right") / len(sample)
    failing_now = 1 - np.searchsorted(sample, free_now, side="right") / len(sample)
    return float(np.clip(failing - failing_now, 0, None).sum() * float(mine["requests_per_day"][0]))
