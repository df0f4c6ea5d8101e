"""What `oomlab demo` shows: the bundled fleet's last week, and the OOM behind the most important finding."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from ..analyses.fleet.classify import classify_ooms
from ..load.sql import sql_text

# The per-OOM causes that bear out each kind of finding.
CAUSES_OF: dict[str, tuple[str, ...]] = {
    "prompt_threshold": ("capacity", "transient_peak"),
    "capacity": ("capacity", "transient_peak"),
    "sizing": ("capacity", "transient_peak"),
    "leak": ("leak",),
    "fragmentation": ("fragmentation",),
    "scheduled_job": ("external_pressure",),
    "external_pressure": ("external_pressure",),
}


def folder_week(con: duckdb.DuckDBPyConnection, folder: Path) -> tuple[datetime, datetime] | None:
    """The 7 days up to midnight after the last request logged by files under `folder`."""
    end = con.sql(sql_text("q_report_folder_day_end"), params={"prefix": str(folder)}).fetchall()[0][0]
    return None if end is None else (end - timedelta(days=7), end)


def most_important_oom(
    con: duckdb.DuckDBPyConnection, findings: list[dict[str, Any]], since: datetime, until: datetime
) -> int | None:
    """The latest OOM in the window whose cause and place bear out the top-ranked finding that has one."""
    events = classify_ooms(con, since, until).filter(pl.col("ts").is_not_null())
    for finding in findings:
        causes = CAUSES_OF.get(finding["kind"])
        if causes is None:
            continue
        places = _places(finding["metrics"])
        match = events.filter(pl.col("cause").is_in(causes))
        if places:
            match = match.filter(pl.col("instance").is_in(places) | pl.col("model_version").is_in(places))
        if not match.is_empty():
            return _latest(match)
    return None if events.is_empty() else _latest(events)


def important_ooms(
    con: duckdb.DuckDBPyConnection, findings: list[dict[str, Any]], since: datetime, until: datetime, count: int
) -> list[int]:
    """Up to `count` OOMs of the window, most important first: for each finding in rank order the latest OOM
    that bears it out (as `most_important_oom` picks one), then the latest of the rest."""
    events = classify_ooms(con, since, until).filter(pl.col("ts").is_not_null())
    chosen: list[int] = []
    for finding in findings:
        if len(chosen) >= count:
            return chosen
        causes = CAUSES_OF.get(finding["kind"])
        if causes is None:
            continue
        places = _places(finding["metrics"])
        match = events.filter(pl.col("cause").is_in(causes) & ~pl.col("event_id").is_in(chosen))
        if places:
            match = match.filter(pl.col("instance").is_in(places) | pl.col("model_version").is_in(places))
        if not match.is_empty():
            chosen.append(_latest(match))
    rest = events.filter(~pl.col("event_id").is_in(chosen))
    while len(chosen) < count and not rest.is_empty():
        chosen.append(_latest(rest))
        rest = rest.filter(pl.col("event_id") != chosen[-1])
    return chosen


def oom_with_snapshot(con: duckdb.DuckDBPyConnection) -> int | None:
    """The logged OOM a snapshot also recorded (a leak's first, when there is one): its incident page shows the
    snapshot view."""
    events = classify_ooms(con)
    logged = events.filter(pl.col("origins").list.contains("snapshot") & (pl.col("sightings") > 1))
    if logged.is_empty():
        return None
    ranked = logged.with_columns((pl.col("cause") == "leak").alias("_leak"))
    return int(ranked.sort(["_leak", "ts", "event_id"], descending=[True, False, False])["event_id"][0])


def _latest(events: pl.DataFrame) -> int:
    """The latest event, preferring those with a request row (its page then has a memory timeline)."""
    ranked = events.with_columns(pl.col("tokens").is_not_null().alias("_logged"))
    return int(ranked.sort(["_logged", "ts", "event_id"])["event_id"][-1])


def _places(metrics: dict[str, Any]) -> list[str]:
    """Instances or model versions a finding names."""
    names: list[str] = []
    for key in ("instance", "instances", "hosts", "model_version", "versions"):
        value = metrics.get(key)
        # some findings list names in one string: "v1.4, v1.6"
        names += value.split(", ") if isinstance(value, str) else [str(v) for v in value or []]
    return names
