"""leak findings: per model version whose process lifetimes leak, the rate, the deploy it started with, what to do."""

from __future__ import annotations

from datetime import datetime
from typing import cast

import duckdb
import polars as pl

from ..analyses.fleet.classify import classify_ooms
from ..analyses.fleet.leaks import first_deploy, leaking_versions, lifetimes
from ..units import format_bytes_short
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
    counts = (
        classified.filter((pl.col("cause") == "leak") & pl.col("duplicate_of").is_null())
        .group_by("model_version")
        .len()
    )
    ooms = dict(zip(counts["model_version"].to_list(), counts["len"].to_list(), strict=True))
    versions = leaking_versions(lives).filter(pl.col("leaks"))
    return [_leak_finding(lives, row, ooms.get(row["model_version"], 0)) for row in versions.iter_rows(named=True)]


def _leak_finding(lives: pl.DataFrame, v: dict, ooms: int) -> Finding:
    """The sentence, the advice and the metrics of one leaking version."""
    version = v["model_version"]
    deploy = first_deploy(lives, version)
    leaking = lives.filter(pl.col("model_version").eq_missing(version) & pl.col("is_leak"))
    name = UNNAMED_VERSION if version is None else version
    rate = _rate(v["median_slope_bytes_per_hour"])
    when = (
        ""
        if deploy is None
        else (
            f", {'starting with its deploy' if deploy[2] else 'since its first request'} at "
            f"{deploy[0]:%Y-%m-%d %H:%M} UTC on {deploy[1]}"
        )
    )
    spread = (
        ""
        if v["leaking_lifetimes"] < 2
        else f", {_rate(v['min_slope_bytes_per_hour'])} to {_rate(v['max_slope_bytes_per_hour'])}"
    )
    restarts = f"; {v['restarts']} restarts dropped it back" if v["restarts"] else ""
    short = v["too_short_lifetimes"]
    counted = f" ({short} more too short to show it)" if short else ""
    text = (
        f"the allocated baseline after requests climbs in {v['leaking_lifetimes']} of {v['lifetimes']} "
        f"process lifetimes{counted} of {name} on {', '.join(v['instances'])} (median {rate}{spread}; "
        f"R^2 at least {v['min_r2']:.2f}){when}{restarts}; {ooms} OOMs classified as leak"
    )
    every = _restart_every(v["restart_every_hours"])
    previous = _previous_version(lives, version)
    since = "" if deploy is None else (f" {'after deploy at' if deploy[2] else 'since'} {deploy[0]:%Y-%m-%d %H:%M} UTC")
    advice = (
        f"fix the leak in model version {name} (allocated baseline +{rate}{since})"
        f"{f'; restart every {every} as a stopgap' if every else ''}"
        f"{f', or roll back to {previous}' if previous else ''}"
    )
    confidence = round(min(0.99, v["leak_share"] * float(cast(float, leaking["r2"].median()))), 2)
    metrics = {
        "model_version": version,
        "lifetimes": v["lifetimes"],
        "leaking_lifetimes": v["leaking_lifetimes"],
        "too_short_lifetimes": short,
        "instances": v["instances"],
        "median_slope_bytes_per_hour": v["median_slope_bytes_per_hour"],
        "min_slope_bytes_per_hour": v["min_slope_bytes_per_hour"],
        "max_slope_bytes_per_hour": v["max_slope_bytes_per_hour"],
        "min_r2": v["min_r2"],
        "first_deploy": None if deploy is None else deploy[0].isoformat(),
        "first_deploy_instance": None if deploy is None else deploy[1],
        "first_deploy_is_deploy": None if deploy is None else deploy[2],
        "restarts": v["restarts"],
        "leak_ooms": ooms,
        "min_hours_to_oom_from_start": v["min_hours_to_oom_from_start"],
        "restart_every_hours": v["restart_every_hours"],
        "rolled_back_to": previous,
    }
    window = Window(None if deploy is None else deploy[0], cast(datetime, leaking["end"].max()))
    return Finding("leak", f"model_version {name}", text, advice, confidence, float(max(1, ooms)), window, metrics)


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
