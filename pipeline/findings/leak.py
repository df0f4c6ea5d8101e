"""leak findings: per model version whose process lifetimes leak, the rate, the deploy it started with, what to do."""

from __future__ import annotations

from datetime import datetime
from typing import cast

import duckdb
import polars as pl

from ..analyses.fleet.classify import classify_ooms
from ..analyses.fleet.leaks import RESTART_HEADROOM_SHARE, first_deploy, leaking_versions, lifetimes
from ..units import format_bytes_short, ooms_text
from .finding import Finding, Window

UNNAMED_VERSION = "(not logged)"  # how a finding names the version of requests whose log names none


def findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """A `leak` finding per model version whose lifetimes leak, over lifetimes overlapping [since, until)."""
    # the leak's impact is the OOMs classified as leaks, classified over the same lifetimes
    lives = lifetimes(con, None, until)
    classified = classify_ooms(con, since, until, lives=lives)
    if since is not None:
        lives = lives.filter(pl.col("end") >= since)
    return leak_findings(lives, classified)


def leak_findings(lives: pl.DataFrame, classified: pl.DataFrame) -> list[Finding]:
    """A finding per leaking version: rate, fit, first deploy, restarts, OOMs and what to do."""
    counts = classified.filter(pl.col("cause") == "leak").group_by("model_version").len()
    ooms = dict(zip(counts["model_version"].to_list(), counts["len"].to_list(), strict=True))
    versions = leaking_versions(lives).filter(pl.col("leaks"))
    return [_leak_finding(lives, row, ooms.get(row["model_version"], 0)) for row in versions.iter_rows(named=True)]


def _leak_finding(lives: pl.DataFrame, v: dict, ooms: int) -> Finding:
    """The sentence, the advice and the metrics of one leaking version."""
    version = v["model_version"]
    deploy = first_deploy(lives, version)
    leaking = lives.filter(pl.col("model_version").eq_missing(version) & pl.col("is_leak"))
    name = UNNAMED_VERSION if version is None else version
    when = (
        ""
        if deploy is None
        else (
            f", {'starting with its deploy' if deploy[2] else 'since its first request'} at "
            f"{deploy[0]:%Y-%m-%d %H:%M} UTC on {deploy[1]}"
        )
    )
    restarts = f"; {v['restarts']} restarts dropped it back" if v["restarts"] else ""
    short = v["too_short_lifetimes"]
    counted = f" ({short} more too short to show it)" if short else ""
    text = (
        f"the allocated baseline after requests climbs in {v['leaking_lifetimes']} of {v['lifetimes']} "
        f"process lifetimes{counted} of {name} on {', '.join(v['instances'])} ({_growth_evidence(v)}; "
        f"R^2 at least {v['min_r2']:.2f}){when}{restarts}; {ooms_text(ooms)} classified as leak"
    )
    previous = _previous_version(lives, version)
    since = "" if deploy is None else (f" {'after deploy at' if deploy[2] else 'since'} {deploy[0]:%Y-%m-%d %H:%M} UTC")
    advice = (
        f"fix the leak in model version {name} (allocated baseline +{_growth_rate(v)}{since})"
        f"{_stopgap(v)}"
        f"{f', or roll back to {previous}' if previous else ''}"
    )
    confidence = round(min(0.99, v["leak_share"] * float(cast(float, leaking["r2"].median()))), 2)
    metrics = {
        "model_version": version,
        "lifetimes": v["lifetimes"],
        "leaking_lifetimes": v["leaking_lifetimes"],
        "too_short_lifetimes": short,
        "instances": v["instances"],
        "rate_unit": "hour" if v["median_slope_bytes_per_hour"] is not None else "request",
        "median_slope_bytes_per_hour": v["median_slope_bytes_per_hour"],
        "min_slope_bytes_per_hour": v["min_slope_bytes_per_hour"],
        "max_slope_bytes_per_hour": v["max_slope_bytes_per_hour"],
        "median_growth_bytes_per_request": v["median_growth_bytes_per_request"],
        "longest_leaking_seconds": v["longest_leaking_seconds"],
        "longest_leaking_requests": v["longest_leaking_requests"],
        "longest_leaking_growth_bytes": v["longest_leaking_growth_bytes"],
        "min_r2": v["min_r2"],
        "first_deploy": None if deploy is None else deploy[0].isoformat(),
        "first_deploy_instance": None if deploy is None else deploy[1],
        "first_deploy_is_deploy": None if deploy is None else deploy[2],
        "restarts": v["restarts"],
        "leak_ooms": ooms,
        "min_hours_to_oom_from_start": v["min_hours_to_oom_from_start"],
        "restart_every_hours": v["restart_every_hours"],
        "restart_every_requests": v["restart_every_requests"],
        "rolled_back_to": previous,
    }
    window = Window(None if deploy is None else deploy[0], cast(datetime, leaking["end"].max()))
    return Finding("leak", f"model_version {name}", text, advice, confidence, float(max(1, ooms)), window, metrics)


def _growth_evidence(v: dict) -> str:
    """How fast the baseline climbs, in the unit the lifetimes support (leaks.RATE_HOURS): `median 120 MiB/h, 87
    MiB/h to 178 MiB/h` over hours of service, else the growth per request and over the real span (`+4.05 GiB over
    47 requests in 18.7 s, 88 MiB per request`)."""
    low, high = v["min_slope_bytes_per_hour"], v["max_slope_bytes_per_hour"]
    if v["median_slope_bytes_per_hour"] is not None:
        spread = "" if v["leaking_lifetimes"] < 2 or low == high else f", {_rate(low)} to {_rate(high)}"
        return f"median {_rate(v['median_slope_bytes_per_hour'])}{spread}"
    per_request = f"{_per_request(v['median_growth_bytes_per_request'])} per request"
    span = (
        f"+{format_bytes_short(v['longest_leaking_growth_bytes'])} over {v['longest_leaking_requests']} requests "
        f"in {_duration(v['longest_leaking_seconds'])}"
    )
    if v["leaking_lifetimes"] < 2:
        return f"{span}, {per_request}"
    return f"median {per_request}; the longest lifetime {span}"


def _growth_rate(v: dict) -> str:
    """The rate the advice quotes: per hour over hours of service, else per request."""
    if v["median_slope_bytes_per_hour"] is not None:
        return _rate(v["median_slope_bytes_per_hour"])
    return f"{_per_request(v['median_growth_bytes_per_request'])} per request"


def _stopgap(v: dict) -> str:
    """`; restart every 11 h as a stopgap` (hours of service), `; restart every 4 requests ...` (a short lifetime),
    or why no interval helps: never an interval shorter than one request."""
    every = _restart_every(v["restart_every_hours"])
    if every:
        return f"; restart every {every} as a stopgap"
    requests = v["restart_every_requests"]
    if requests is None:
        return ""
    if requests < 1:
        share = f"{RESTART_HEADROOM_SHARE * 100:.0f} %"
        return f"; no restart interval keeps ahead of it: one request leaks more than {share} of the room it has"
    return f"; restart every {requests} request{'s' if requests != 1 else ''} as a stopgap"


def _per_request(value: float | None) -> str:
    return "unknown" if value is None else format_bytes_short(value)


def _duration(seconds: float | None) -> str:
    """A real span for people: `18.7 s`, `42 min`."""
    if seconds is None:
        return "an unknown time"
    return f"{seconds:.1f} s" if seconds < 60 else f"{seconds / 60:.0f} min"


def _rate(bytes_per_hour: float | None) -> str:
    """`106 MiB/h`, `1.20 GiB/h`."""
    if bytes_per_hour is None:
        return "unknown"
    value = abs(bytes_per_hour)
    text = f"{format_bytes_short(value)}/h"
    return text if bytes_per_hour >= 0 else f"-{text}"


def _restart_every(hours: float | None) -> str | None:
    """A restart interval for people: `11 h`, `45 min`, `12 s`."""
    if hours is None or hours <= 0:
        return None
    if hours >= 1:
        return f"{int(hours)} h"
    return f"{int(hours * 60)} min" if hours * 60 >= 1 else f"{max(1, int(hours * 3600))} s"


def _previous_version(lives: pl.DataFrame, version: str | None) -> str | None:
    """The version that ran before `version` was first deployed, on the same instance."""
    deploy = first_deploy(lives, version)
    if deploy is None:
        return None
    before = lives.filter(
        (pl.col("instance") == deploy[1]) & (pl.col("start") < deploy[0]) & pl.col("model_version").ne_missing(version)
    ).sort("start")
    return None if before.is_empty() else before["model_version"][-1]
