"""The weekly report as data: headline changes, ranked findings with actions, and every chart's series.

The document is JSON-able (`oomlab report weekly --json`) and is all the HTML layer draws from.
Times are naive UTC, as stored; the window is half-open [since, until).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import duckdb
import polars as pl

from ..analyses.fleet import aggregates, forecast, jobs, leaks
from ..analyses.fleet.whole_history import whole_history_once
from ..analyses.shared import shared, shared_results
from ..analyses.window import utc_naive
from ..errors import OomlabError
from ..findings.collect import collect_findings
from ..findings.data_quality import data_quality_note
from ..findings.finding import Finding
from ..load.sql import sql_text
from ..units import ooms_text
from .actions import finding_entries
from .downsample import downsample
from .snapshots import snapshots_in_window, top_sites

WEEK = timedelta(days=7)
HEADLINE_LABELS: dict[str, str] = {
    "ooms": "OOMs",
    "oom_rate_per_1k": "OOM rate per 1,000 requests",
    "instances_affected": "instances affected",
    "requests_lost": "requests lost",
    "requests": "requests",
}
RATE_CUTS: tuple[str, ...] = ("model_version", "input_length", "batch_tokens")
# Caps that keep a page a few MB on any fleet: the worst devices, versions and lifetimes are drawn, the
# JSON and tables keep the rest.
MAX_LEAK_SERIES = 12
MAX_WATER_DEVICES = 24
MAX_CATEGORIES = 30


@dataclass(frozen=True)
class ReportWindow:
    """The reported period and the one before it, of the same length."""

    since: datetime
    until: datetime

    @property
    def previous(self) -> tuple[datetime, datetime]:
        return self.since - (self.until - self.since), self.since

    def to_json(self) -> dict[str, str]:
        return {"since": self.since.isoformat(), "until": self.until.isoformat()}


def report_window(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None) -> ReportWindow:
    """[since, until): by default the 7 days up to midnight after the latest event; one end given, a week."""
    since, until = utc_naive(since), utc_naive(until)
    if until is None:
        until = since + WEEK if since is not None else data_range(con)["day_end"]
    if until is None:
        raise OomlabError("the database holds no requests or logged OOMs with a time to report on", hint=_no_week(con))
    since = since or until - WEEK
    if since >= until:
        raise OomlabError(f"--since {since:%Y-%m-%d %H:%M} is not before --until {until:%Y-%m-%d %H:%M}")
    return ReportWindow(since, until)


def _no_week(con: duckdb.DuckDBPyConnection) -> str:
    """What to run instead of a weekly report over a database whose OOMs no week holds."""
    untimed, in_snapshots = con.sql(sql_text("q_ooms_outside_windows")).fetchall()[0]
    held = [f"{ooms_text(untimed)} without a time"] if untimed else []
    held += [f"{ooms_text(in_snapshots)} recorded only in snapshots"] if in_snapshots else []
    if not held:
        return "run `oomlab ingest` first"
    return f"{' and '.join(held)}: `oomlab findings` and `oomlab report incident` explain them"


@shared()
def data_range(con: duckdb.DuckDBPyConnection) -> dict[str, datetime | None]:
    """First and last event in the database and the midnight after the last (a scan of every request: the
    window and the page's data range share one)."""
    first, last, day_end = con.sql(sql_text("q_report_data_range")).fetchall()[0]
    return {"first_ts": first, "last_ts": last, "day_end": day_end}


def weekly_data(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> dict[str, Any]:
    """Everything the weekly report shows, for [since, until) against the period before it."""
    with shared_results():  # the charts reuse the findings' lifetimes and forecasts
        whole_history_once(con)
        return _document(con, report_window(con, since, until))


def _document(con: duckdb.DuckDBPyConnection, window: ReportWindow) -> dict[str, Any]:
    found = collect_findings(con, window.since, window.until)
    snapshots = snapshots_in_window(con, window.since, window.until)
    return {
        "report": "weekly",
        "window": window.to_json(),
        "previous_window": {"since": window.previous[0].isoformat(), "until": window.previous[1].isoformat()},
        "data_range": {k: v.isoformat() if v else None for k, v in data_range(con).items()},
        "headline": headline(con, window),
        "data_quality": data_quality_json(con),
        "findings": finding_entries(found),
        "heatmap": heatmap(con, window),
        "jobs": job_windows(con, window, found),
        "water": (water := water_series(con, window)),
        "forecast": forecast_rows(con, window, water),
        "rates": {cut: rate_rows(con, cut, window) for cut in RATE_CUTS},
        "leaks": leak_trends(con, window),
        "snapshots": snapshots,
        "top_sites": top_sites(con, [s["snapshot_id"] for s in snapshots]),
    }


def data_quality_json(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The data-quality note the findings section opens with (findings/data_quality.py), or None."""
    note = data_quality_note(con)
    return None if note is None else note.to_json()


def headline(con: duckdb.DuckDBPyConnection, window: ReportWindow) -> list[dict[str, Any]]:
    """Each headline metric this period and the one before, with the change."""
    rows = {r["metric"]: r for r in aggregates.period_over_period(con, window.since, window.until).to_dicts()}
    return [
        {
            "metric": metric,
            "label": label,
            "previous": rows[metric]["last_week"],
            "current": rows[metric]["this_week"],
            "change": rows[metric]["change"],
            "change_pct": rows[metric]["change_pct"],
        }
        for metric, label in HEADLINE_LABELS.items()
    ]


def heatmap(con: duckdb.DuckDBPyConnection, window: ReportWindow) -> dict[str, Any]:
    """7 x 24 grids (ISO weekday x hour of day) of requests, OOMs and the OOM rate per 1,000 requests."""
    cells = con.sql(sql_text("q_report_heatmap"), params=_window(window)).fetchall()
    grid: dict[str, list[list[float | None]]] = {
        name: [[0 if name != "rate" else None] * 24 for _ in range(7)] for name in ("requests", "ooms", "rate")
    }
    for day, hour, requests, ooms, with_traffic in cells:
        grid["requests"][day - 1][hour] = requests
        grid["ooms"][day - 1][hour] = ooms
        grid["rate"][day - 1][hour] = round(1000.0 * with_traffic / requests, 3) if requests else None
    return {"days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], "hours": list(range(24)), **grid}


def job_windows(con: duckdb.DuckDBPyConnection, window: ReportWindow, found: list[Finding]) -> list[dict[str, Any]]:
    """Scheduled jobs that ran in the window (their recurring windows, the hosts their calendar selectors
    matched, whether a finding blames them), then jobs whose selectors matched no instance at all."""
    blamed = {f.metrics.get("name") for f in found if f.kind == "scheduled_job"}
    hosts = {row["name"]: row for row in jobs.job_hosts(con).to_dicts()}
    plans = jobs.schedules(con, window.since, window.until)
    out = [_job_entry(name, schedule, hosts.get(name, {}), name in blamed) for name, schedule in sorted(plans.items())]
    for name, row in sorted(hosts.items()):
        if name not in plans and not row["hosts_matched"]:
            out.append(_job_entry(name, None, row, False))
    return out


def _job_entry(name: str, schedule: jobs.Schedule | None, hosts: dict[str, Any], blamed: bool) -> dict[str, Any]:
    """One job of the jobs section; without a schedule (no host matched) it has no runs and no spans."""
    entry: dict[str, Any] = {
        "name": name,
        "schedule": None,
        "runs": None,
        "blamed": blamed,
        "weekdays": [],
        "spans": [],
    }
    if schedule is not None:
        one_off = schedule.runs == 1 and schedule.first_start is not None
        weekdays = [schedule.first_start.isoweekday()] if one_off else _weekdays(schedule.text)
        entry |= {"schedule": schedule.text, "runs": schedule.runs, "weekdays": weekdays}
        entry["spans"] = [_hours(text) for text in schedule.windows]
    entry["selectors"] = hosts.get("selectors", [])
    entry["hosts"] = hosts.get("hosts_matched", [])
    entry["unmatched_selectors"] = hosts.get("unmatched_selectors", [])
    return entry


def _weekdays(text: str) -> list[int]:
    """ISO weekdays a schedule text names ("weekly on Saturday ..."); every day for daily or one-off jobs."""
    names = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    named = [i + 1 for i, day in enumerate(names) if day in text]
    return named or list(range(1, 8))


def _hours(span: str) -> list[float]:
    """ "01:00-02:30" as [1.0, 2.5] hours of the day (an end at or before the start runs past midnight)."""
    start, end = (int(t[:2]) + int(t[3:5]) / 60 for t in span.split("-"))
    return [start, end if end > start else end + 24]


def water_series(con: duckdb.DuckDBPyConnection, window: ReportWindow) -> list[dict[str, Any]]:
    """Hourly held and peak levels per device (fractions of the card), and the device level telemetry saw in
    the same hours where there is telemetry; downsampled keeping OOM hours."""
    hourly = forecast.hourly_levels(con, window.since, window.until)  # the forecast's own rows, computed once
    worst = (
        hourly.group_by("instance", "gpu_index")
        .agg(pl.col("peak_level").max())
        .sort(["peak_level", "instance", "gpu_index"], descending=[True, False, False], nulls_last=True)
        .head(MAX_WATER_DEVICES)
    )
    hourly = hourly.join(worst.select("instance", "gpu_index"), on=["instance", "gpu_index"], how="semi")
    seen = con.sql(sql_text("q_report_telemetry_hourly"), params=_window(window)).pl()
    hourly = hourly.join(seen, on=["instance", "gpu_index", "hour"], how="left")
    out = []
    for (instance, gpu), rows in hourly.group_by(["instance", "gpu_index"], maintain_order=True):
        rows = downsample(
            rows.with_columns((pl.col("ooms") > 0).alias("has_oom")), "hour", "peak_level", keep="has_oom"
        )
        out.append(
            {
                "instance": instance,
                "gpu_index": gpu,
                "device_total": rows["device_total"].max(),
                "hour": rows["hour"].to_list(),
                "held_level": _rounded(rows["held_level"]),
                "peak_level": _rounded(rows["peak_level"]),
                "device_level": _rounded(rows["device_level"]),
                "ooms": rows["ooms"].to_list(),
            }
        )
    return out


def forecast_rows(
    con: duckdb.DuckDBPyConnection, window: ReportWindow, water: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Per device: level now, the week's peak (from `water`), trend per day and the dates it reaches 80 / 95 %
    (forecast.py); a band the device is already at or over reads `already_80` / `already_95` instead of a
    date, so no date before the forecast's own moment is shown."""
    keep = [
        "instance",
        "gpu_index",
        "card",
        "model_version",
        "as_of",
        "level_now",
        "slope_per_day",
        "r2",
        "growth",
        "days_to_80",
        "date_80",
        "days_to_95",
        "date_95",
        "expected_ooms",
    ]
    table = forecast.forecast(con, window.since, window.until)
    peaks = {
        (w["instance"], w["gpu_index"]): max((v for v in w["peak_level"] if v is not None), default=None)
        for w in water or []
    }
    rows = table.select([c for c in keep if c in table.columns]).to_dicts()
    for row in rows:
        row["peak_level"] = peaks.get((row["instance"], row["gpu_index"]))
        for level in forecast.LEVELS:
            band = round(level * 100)
            date = row.get(f"date_{band}")
            passed = (row["level_now"] or 0) >= level or (date is not None and date <= row["as_of"])
            row[f"already_{band}"] = passed
            if passed:
                row[f"date_{band}"] = None
    return rows


def rate_rows(con: duckdb.DuckDBPyConnection, cut: str, window: ReportWindow) -> list[dict[str, Any]]:
    """OOMs and OOM rate by one cut (model version, prompt-size bucket) in the window; the MAX_CATEGORIES
    with the most OOMs when there are more, in the cut's order. The rate counts the OOMs of instances with a
    request log (`ooms_with_traffic`), the only ones whose requests are counted too."""
    table = aggregates.oom_rates(con, cut, window.since, window.until).with_row_index("_order")
    if table.height > MAX_CATEGORIES:
        table = table.sort(["ooms", "_order"], descending=[True, False]).head(MAX_CATEGORIES).sort("_order")
    return table.select("key", "key_order", "requests", "ooms", "ooms_with_traffic", "oom_rate_per_1k").to_dicts()


def leak_trends(con: duckdb.DuckDBPyConnection, window: ReportWindow) -> list[dict[str, Any]]:
    """The baseline after requests, window by window, of each leaking or cache-growing process lifetime."""
    lives = leaks.lifetimes(con, None, window.until)
    flagged = lives.filter((pl.col("is_leak") | pl.col("is_cache_growth")) & (pl.col("end") >= window.since))
    flagged = flagged.sort("slope_bytes_per_hour", descending=True, nulls_last=True).head(MAX_LEAK_SERIES)
    if flagged.is_empty():
        return []
    points = leaks.windows(con, None, window.until).filter(pl.col("baseline_bytes").is_not_null())
    out = []
    for life in flagged.iter_rows(named=True):
        rows = points.filter(
            (pl.col("instance") == life["instance"])
            & (pl.col("gpu_index") == life["gpu_index"])
            & (pl.col("lifetime") == life["lifetime"])
        ).sort("baseline_ts")
        out.append(
            {
                "instance": life["instance"],
                "gpu_index": life["gpu_index"],
                "lifetime": life["lifetime"],
                "model_version": life["model_version"],
                "kind": "leak" if life["is_leak"] else "cache growth",
                "slope_bytes_per_hour": life["slope_bytes_per_hour"],
                "r2": life["r2"],
                "ts": rows["baseline_ts"].to_list(),
                "baseline_bytes": rows["baseline_bytes"].to_list(),
                "reserved_bytes": rows["last_reserved_bytes"].to_list(),
            }
        )
    return out


def _window(window: ReportWindow) -> dict[str, datetime]:
    return {"since": window.since, "until": window.until}


def _rounded(series: pl.Series) -> list[float | None]:
    return series.round(4).to_list()
