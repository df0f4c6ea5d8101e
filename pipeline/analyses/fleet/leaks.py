"""Leak detection from request logs: per process lifetime, the trend of the allocated baseline after requests.

The baseline is the windowed minimum of `allocated_after` (view `fct_leak_windows`): whatever a request
holds while it runs is gone by the next quiet moment, so only memory nobody frees raises the minimum. A
robust line (Theil-Sen) through the windowed minima gives the slope; allocator cache growth (reserved
climbs, allocated flat) and flat pre-allocated pools are reported as data, never as leaks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import cast

import duckdb
import numpy as np
import polars as pl

from ...load.sql import sql_text
from ...units import MIB
from ..shared import shared
from .oom_limits import instance_limits

# A leak must explain a trend, not noise: the fitted line must describe the windowed minima well and the
# minimum must rise in most window steps. The growth must clear what allocator rounding and request jitter
# leave in a baseline, which 64 MiB does by far, whatever the model's size: a floor that scaled with the
# level hid slow leaks on large models (300 MiB over 20 hours on 57 GB of weights, R^2 0.97, rising in
# every window; 4 GiB under 140 GiB of weights).
MIN_WINDOWS = 4
MIN_R2 = 0.7
MIN_RISING_SHARE = 0.5
MIN_GROWTH_BYTES = 64 * MIB
# Cache growth: reserved memory climbs by at least this much while the allocated baseline does not.
MIN_CACHE_GROWTH_BYTES = 256 * MIB
MIN_CACHE_GROWTH_SHARE = 0.10
# A pool reserved at start (vLLM's gpu_memory_utilization) holds most of the device from the first minute.
POOL_SHARE = 0.6
# How a leaking lifetime can end in a restart that gives the leak back (not a deploy, not a quiet gap).
RESTARTS = ("baseline_drop", "process_start")
# A version leaks when most of its fitted lifetimes do.
VERSION_LEAK_SHARE = 0.5
# The stopgap restart interval: restart before the leak has taken this share of the room requests have
# above the starting baseline. The largest requests fail first, long before a typical one would.
RESTART_HEADROOM_SHARE = 0.10
# A rate per hour is a measurement only over a lifetime that lasted an hour: from a shorter one it extrapolates
# past what was seen (18 seconds of a leak are no "GiB/h"). Such a lifetime's rate is its growth per request
# (the unit its data does hold) and its growth over its real span; a restart interval is then given in
# requests, never shorter than one (a restart cannot come between the allocations of one request).
RATE_HOURS = 1.0


@dataclass(frozen=True)
class Fit:
    """A robust line through (hours, bytes) points and how well it describes them."""

    slope: float
    intercept: float
    r2: float
    rising_share: float


def theil_sen(x: np.ndarray, y: np.ndarray) -> Fit:
    """Median of pairwise slopes (robust to a few odd windows), R^2 of that line, share of rising steps."""
    if len(x) < 2:
        return Fit(0.0, float(y[0]) if len(y) else 0.0, 0.0, 0.0)
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    keep = dx > 0
    slope = float(np.median((y[j] - y[i])[keep] / dx[keep])) if keep.any() else 0.0
    intercept = float(np.median(y - slope * x))
    residual = float(np.sum((y - (intercept + slope * x)) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = max(0.0, 1.0 - residual / total) if total > 0 else 0.0
    return Fit(slope, intercept, r2, _rising_share(np.diff(y)))


def _rising_share(steps: np.ndarray) -> float:
    """The share of rising steps among those that moved. A level written in coarse units (GiB with two decimals:
    10.7 MB) stays flat over many windows of a slow leak and then rises by one unit: a flat step says nothing
    either way, a falling one is evidence against a climb. Fewer than MIN_WINDOWS - 1 rises are a step or two
    (a buffer allocated once), not a climb: 0."""
    moved = steps[steps != 0]
    rises = int(np.sum(moved > 0))
    return rises / len(moved) if rises >= MIN_WINDOWS - 1 else 0.0


@shared()
def windows(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """The windowed minima of every lifetime overlapping [since, until) (view `fct_leak_windows`)."""
    return con.sql(sql_text("q_leak_windows"), params={"since": since, "until": until}).pl()


@shared()
def lifetimes(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """One row per instance and process lifetime: baseline trend, leak and cache-growth verdicts."""
    frame = windows(con, since, until)
    if frame.is_empty():
        return _empty_lifetimes()
    rows = [
        _lifetime_row(group)
        for _key, group in frame.group_by(["instance", "gpu_index", "lifetime"], maintain_order=True)
    ]
    lives = pl.DataFrame(rows, schema=_FITTED_SCHEMA, orient="row")
    limits = instance_limits(con).select(
        "instance",
        "gpu_index",
        "card",
        "card_limit_bytes",
        "cap_bytes",
        pl.col("p95_request_bytes").cast(pl.Int64).alias("request_peak_bytes"),
    )
    lives = lives.join(limits, on=["instance", "gpu_index"], how="left")
    # the limit a leak runs into: what this card has been seen to serve, else the cap, else the device
    limit = pl.coalesce("card_limit_bytes", "cap_bytes", "device_total")
    # the growth a request leaves, on average over the lifetime: its growth over its requests (the unit a lifetime
    # of seconds holds, and one a person can check against the log)
    per_request = pl.col("growth_bytes") / pl.col("requests").clip(lower_bound=1)
    lives = lives.with_columns(limit.alias("limit_bytes"), per_request.alias("growth_bytes_per_request")).with_columns(
        _hours_to_oom("baseline_end_bytes").alias("hours_to_oom"),
        _hours_to_oom("baseline_start_bytes").alias("hours_to_oom_from_start"),
        _restart_within().alias("restart_within_hours"),
        _restart_within_requests().alias("restart_within_requests"),
    )
    return lives.select(list(LIFETIME_SCHEMA)).sort(["instance", "gpu_index", "lifetime"])


def _lifetime_row(w: pl.DataFrame) -> tuple:
    """Fit one lifetime's windows and judge it."""
    start, end = w["lifetime_start"][0], w["lifetime_end"][0]
    hours = np.array([(t - start).total_seconds() / 3600 for t in w["baseline_ts"]], dtype=float)
    fit = theil_sen(hours, w["baseline_bytes"].to_numpy().astype(float))
    # the lifetime's first and last 5 buckets; a range that cuts the lifetime uses its first / last window
    first = _ends(w["first_baseline_bytes"], w["baseline_bytes"], 0)
    last = _ends(w["last_baseline_bytes"], w["baseline_bytes"], -1)
    device_total = w["device_total"].max()
    total = None if device_total is None else int(cast(int, device_total))
    is_leak = _is_leak(fit, len(w), first, last)
    cache = _cache(w, hours, is_leak)
    return (
        w["instance"][0],
        int(w["gpu_index"][0]),
        int(w["lifetime"][0]),
        w["model_version"][0],
        w["restart_reason"][0],
        start,
        end,
        int(w["requests"].sum()),
        int(w["ooms"].sum()),
        len(w),
        first,
        last,
        last - first,
        fit.slope,
        fit.r2,
        fit.rising_share,
        *cache.values(),
        total,
        is_leak,
        _is_pool(first, last - first, total, is_leak),
    )


def _room() -> pl.Expr:
    """RESTART_HEADROOM_SHARE of the room above the starting baseline: what a leak may take before a restart."""
    return RESTART_HEADROOM_SHARE * (pl.col("limit_bytes") - pl.col("baseline_start_bytes"))


def _restart_within() -> pl.Expr:
    """Hours until the leak has taken RESTART_HEADROOM_SHARE of the room above the starting baseline, never less
    than the lifetime's time per request; None for a lifetime shorter than RATE_HOURS, whose hours would be an
    extrapolation (its interval is `restart_within_requests`)."""
    hours = (_room() / pl.col("slope_bytes_per_hour")).clip(lower_bound=0.0)
    per_request = _span_hours() / pl.col("requests").clip(lower_bound=1)
    known = pl.col("is_leak") & (pl.col("slope_bytes_per_hour") > 0) & (_span_hours() >= RATE_HOURS)
    return pl.when(known).then(pl.max_horizontal(hours, per_request)).otherwise(None)


def _restart_within_requests() -> pl.Expr:
    """Requests until the leak has taken RESTART_HEADROOM_SHARE of the room, whole ones only: 0 when one request
    leaks more than that (no restart interval keeps ahead of it)."""
    per_request = pl.col("growth_bytes_per_request")
    requests = (_room() / per_request).floor().clip(lower_bound=0.0).cast(pl.Int64)
    return pl.when(pl.col("is_leak") & (per_request > 0)).then(requests).otherwise(None)


def _span_hours() -> pl.Expr:
    """How long a lifetime lasted, first to last request."""
    return (pl.col("end") - pl.col("start")).dt.total_microseconds() / 3.6e9


def _is_leak(fit: Fit, windows: int, first: int, last: int) -> bool:
    """A steady climb: enough windows, a good fit, mostly rising steps, and growth that matters."""
    growth = last - first
    return (
        windows >= MIN_WINDOWS
        and fit.slope > 0
        and fit.r2 >= MIN_R2
        and fit.rising_share >= MIN_RISING_SHARE
        and growth >= MIN_GROWTH_BYTES
    )


def _cache(w: pl.DataFrame, hours: np.ndarray, is_leak: bool) -> dict[str, object]:
    """Reserved memory: lowest level, level at the end, growth, slope, and whether it is cache growth."""
    reserved = w["reserved_min_bytes"].to_numpy().astype(float)
    known = ~np.isnan(reserved)
    end = w["last_reserved_bytes"][-1]
    if not known.any() or end is None:
        return {"low": None, "end": None, "growth": None, "slope": None, "is_growth": False}
    low, end = int(reserved[known].min()), int(cast(int, end))
    growth = end - low
    # a step (a cache that fills within hours and stays) is growth too, so no slope is required
    is_growth = (
        not is_leak and len(w) >= MIN_WINDOWS and growth >= max(MIN_CACHE_GROWTH_BYTES, MIN_CACHE_GROWTH_SHARE * low)
    )
    slope = theil_sen(hours[known], reserved[known]).slope
    return {"low": low, "end": end, "growth": growth, "slope": slope, "is_growth": is_growth}


def _hours_to_oom(baseline: str) -> pl.Expr:
    """Hours until the baseline plus a typical request peak (p95) reaches the limit, at the fitted slope."""
    room = pl.col("limit_bytes") - pl.col("request_peak_bytes").fill_null(0) - pl.col(baseline)
    hours = (room / pl.col("slope_bytes_per_hour")).clip(lower_bound=0.0)
    return pl.when(pl.col("is_leak") & (pl.col("slope_bytes_per_hour") > 0)).then(hours).otherwise(None)


def _ends(level: pl.Series, fallback: pl.Series, at: int) -> int:
    """The start (at=0) or end (at=-1) baseline: from the lifetime's edge buckets when in range."""
    value = level[at] if level[at] is not None else fallback[at]
    return int(cast(int, value))


def _is_pool(first: int, growth: int, device_total: int | None, is_leak: bool) -> bool:
    """Most of the device allocated from the start and flat: a pre-allocated pool, not a leak."""
    if device_total is None or is_leak:
        return False
    return first >= POOL_SHARE * device_total and abs(growth) < max(MIN_GROWTH_BYTES, 0.01 * first)


_FITTED_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "instance": pl.Utf8,
    "gpu_index": pl.Int32,
    "lifetime": pl.Int64,
    "model_version": pl.Utf8,
    "restart_reason": pl.Utf8,
    "start": pl.Datetime("us"),
    "end": pl.Datetime("us"),
    "requests": pl.Int64,
    "ooms": pl.Int64,
    "windows": pl.Int64,
    "baseline_start_bytes": pl.Int64,
    "baseline_end_bytes": pl.Int64,
    "growth_bytes": pl.Int64,
    "slope_bytes_per_hour": pl.Float64,
    "r2": pl.Float64,
    "rising_share": pl.Float64,
    "reserved_low_bytes": pl.Int64,
    "reserved_end_bytes": pl.Int64,
    "reserved_growth_bytes": pl.Int64,
    "reserved_slope_bytes_per_hour": pl.Float64,
    "is_cache_growth": pl.Boolean,
    "device_total": pl.Int64,
    "is_leak": pl.Boolean,
    "is_preallocated_pool": pl.Boolean,
}
# What `lifetimes` returns, in this order.
_ORDER = (
    "instance",
    "gpu_index",
    "lifetime",
    "model_version",
    "start",
    "end",
    "restart_reason",
    "requests",
    "ooms",
    "windows",
    "baseline_start_bytes",
    "baseline_end_bytes",
    "growth_bytes",
    "slope_bytes_per_hour",
    "growth_bytes_per_request",
    "r2",
    "rising_share",
    "card",
    "device_total",
    "limit_bytes",
    "request_peak_bytes",
    "hours_to_oom",
    "hours_to_oom_from_start",
    "restart_within_hours",
    "restart_within_requests",
    "is_leak",
    "is_cache_growth",
    "is_preallocated_pool",
    "reserved_low_bytes",
    "reserved_end_bytes",
    "reserved_growth_bytes",
    "reserved_slope_bytes_per_hour",
)
_ADDED: dict[str, pl.DataType | type[pl.DataType]] = {
    "card": pl.Utf8,
    "request_peak_bytes": pl.Int64,
    "limit_bytes": pl.Int64,
    "hours_to_oom": pl.Float64,
    "hours_to_oom_from_start": pl.Float64,
    "restart_within_hours": pl.Float64,
    "restart_within_requests": pl.Int64,
    "growth_bytes_per_request": pl.Float64,
}
LIFETIME_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    name: {**_FITTED_SCHEMA, **_ADDED}[name] for name in _ORDER
}


def _empty_lifetimes() -> pl.DataFrame:
    return pl.DataFrame(schema=LIFETIME_SCHEMA)


def leaking_versions(lives: pl.DataFrame) -> pl.DataFrame:
    """Per model version: its lifetimes, how many leak, the rates, its first deploy and the restarts. Rates per
    hour come from the leaking lifetimes that lasted RATE_HOURS or more (None when none did); the growth per
    request from all of them, and the longest one's growth over its real span."""
    fitted = _long_enough(lives.filter(pl.col("windows") >= MIN_WINDOWS))
    leak = pl.col("is_leak")
    hourly = leak & (_span_hours() >= RATE_HOURS)
    span = _span_hours().filter(leak)
    per_version = fitted.group_by("model_version").agg(
        pl.col("can_show").sum().alias("lifetimes"),
        (~pl.col("can_show")).sum().alias("too_short_lifetimes"),
        leak.sum().alias("leaking_lifetimes"),
        pl.col("instance").filter(leak).unique().sort().alias("instances"),
        pl.col("slope_bytes_per_hour").filter(hourly).median().alias("median_slope_bytes_per_hour"),
        pl.col("slope_bytes_per_hour").filter(hourly).min().alias("min_slope_bytes_per_hour"),
        pl.col("slope_bytes_per_hour").filter(hourly).max().alias("max_slope_bytes_per_hour"),
        pl.col("growth_bytes_per_request").filter(leak).median().alias("median_growth_bytes_per_request"),
        (span.max() * 3600).alias("longest_leaking_seconds"),
        pl.col("requests").filter(leak).sort_by(span).last().alias("longest_leaking_requests"),
        pl.col("growth_bytes").filter(leak).sort_by(span).last().alias("longest_leaking_growth_bytes"),
        pl.col("r2").filter(leak).min().alias("min_r2"),
        pl.col("start").min().alias("first_seen"),
        pl.col("hours_to_oom_from_start").filter(leak).min().alias("min_hours_to_oom_from_start"),
        pl.col("restart_within_hours").filter(leak).min().alias("restart_every_hours"),
        pl.col("restart_within_requests").filter(leak).min().alias("restart_every_requests"),
        (leak & pl.col("restart_reason").is_in(RESTARTS)).sum().alias("restarts"),
        pl.col("ooms").filter(leak).sum().alias("ooms_in_leaking_lifetimes"),
    )
    # a version none of whose lifetimes lasted long enough to show a leak has no share at all (0 / 0 is NaN, which
    # polars orders above every number): it is no leaking version
    share = pl.when(pl.col("lifetimes") > 0).then(pl.col("leaking_lifetimes") / pl.col("lifetimes"))
    leaks = (share >= VERSION_LEAK_SHARE).fill_null(False)
    return per_version.with_columns(share.alias("leak_share"), leaks.alias("leaks")).sort("model_version")


def _long_enough(fitted: pl.DataFrame) -> pl.DataFrame:
    """`can_show`: whether a lifetime lasted long enough to show its version's leak, that is to grow by
    MIN_GROWTH_BYTES at the version's median leaking slope. A version that crashes at every OOM, or is
    restarted often, has many lifetimes of minutes; they cannot show a leak, so they are no evidence against
    one (the leaking lifetimes themselves always count)."""
    hours = (pl.col("end") - pl.col("start")).dt.total_seconds() / 3600
    slopes = (
        fitted.filter(pl.col("is_leak"))
        .group_by("model_version")
        .agg(pl.col("slope_bytes_per_hour").median().alias("version_slope"))
    )
    shows = pl.col("version_slope").is_null() | (hours * pl.col("version_slope") >= MIN_GROWTH_BYTES)
    # A lifetime that climbs as a leak does (a good fit, mostly rising) but stopped short of the floor shows the
    # leak at its own, slower rate (the same version leaks faster under more traffic): no evidence against it.
    climbing = (
        (pl.col("slope_bytes_per_hour") > 0)
        & (pl.col("r2") >= MIN_R2)
        & (pl.col("rising_share") >= MIN_RISING_SHARE)
        & (pl.col("growth_bytes") < MIN_GROWTH_BYTES)
    )
    return (
        fitted.join(slopes, on="model_version", how="left")
        .with_columns((pl.col("is_leak") | (shows & ~climbing.fill_null(False))).alias("can_show"))
        .drop("version_slope")
    )


def first_deploy(lives: pl.DataFrame, version: str | None) -> tuple[datetime, str, bool] | None:
    """When and where `version` first ran, and whether that was a deploy (it replaced another version); None
    is the lifetimes of a log that names no version."""
    rows = lives.filter(pl.col("model_version").eq_missing(version)).sort("start")
    if rows.is_empty():
        return None
    deploys = rows.filter(pl.col("restart_reason") == "version_change")
    first = (deploys if not deploys.is_empty() else rows).row(0, named=True)
    return first["start"], first["instance"], not deploys.is_empty()


def cache_growth(lives: pl.DataFrame) -> pl.DataFrame:
    """Lifetimes whose allocator cache grew while the allocated baseline stayed flat (not leaks)."""
    return lives.filter(pl.col("is_cache_growth")).select(
        "instance",
        "gpu_index",
        "lifetime",
        "model_version",
        "start",
        "end",
        "baseline_start_bytes",
        "baseline_end_bytes",
        "reserved_low_bytes",
        "reserved_end_bytes",
        "reserved_growth_bytes",
        "reserved_slope_bytes_per_hour",
    )
