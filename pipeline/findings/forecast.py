"""forecast findings: devices whose held memory is on course to cross 95 % of the card, and when."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from ..analyses.fleet.allocator_settings import allocator_settings, settings_for
from ..analyses.fleet.forecast import HORIZON_DAYS, LEVELS, forecast
from .allocator_advice import cache_advice
from .finding import Finding, Window


def findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """`forecast` findings: devices whose daily peak will cross 80 % or 95 % within 14 days.

    impact: the OOMs the rising allocated level adds over those 14 days if nothing changes
    (`_expected_ooms`); allocator cache growth adds none and is reported with low confidence.
    """
    table = forecast(con, since, until)
    if table.is_empty():
        return []
    soon = table.filter(
        pl.any_horizontal(
            [
                (pl.col(f"days_to_{round(lv * 100)}") > 0) & (pl.col(f"days_to_{round(lv * 100)}") <= HORIZON_DAYS)
                for lv in LEVELS
            ]
        )
    )
    sightings = allocator_settings(con, until)
    return [_finding(_with_settings(row, sightings)) for row in soon.iter_rows(named=True)]


def _with_settings(row: dict, sightings: pl.DataFrame) -> dict:
    """A cache-growth row with the allocator settings its device ran with when forecast and the remedy they
    leave (`allocator_settings`, `allocator_step`); other rows as they are."""
    if row["growth"] != "allocator_cache":
        return row
    return {**row, **cache_advice(settings_for(sightings, [row["instance"]], row["as_of"]), option_first=False)}


def _finding(row: dict) -> Finding:
    """The forecast finding of one device row."""
    subject = row["instance"] if row["gpu_index"] == 0 else f"{row['instance']} GPU {row['gpu_index']}"
    crossings = [
        f"{round(lv * 100)} % on {row[f'date_{round(lv * 100)}']:%Y-%m-%d %H:%M} UTC "
        f"(in {row[f'days_to_{round(lv * 100)}']:.1f} days)"
        for lv in LEVELS
        if row[f"days_to_{round(lv * 100)}"] is not None
    ]
    evidence = (
        f"{row['card']}, {row['model_version']}: held memory (reserved after requests) peaks at "
        f"{row['level_now']:.0%} of the card a day and rises {row['slope_per_day']:.1%} a day "
        f"(r2 {row['r2']:.2f}) over the {row['hours_fitted']} hours since the process started at "
        f"{row['lifetime_start']:%Y-%m-%d %H:%M}; {_allocated_evidence(row)}. Projected: {', '.join(crossings)}."
    )
    cache = row["growth"] == "allocator_cache"
    end = row["date_95"] or row["date_80"]
    return Finding(
        kind="forecast",
        subject=subject,
        evidence=evidence,
        advice=_advice(row, cache),
        confidence=0.3 if cache else round(min(0.9, max(0.3, row["r2"])), 2),
        impact=round(row["expected_ooms"], 1),
        window=Window(row["as_of"], end),
        metrics={k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items() if k != "remedy"},
    )


def _allocated_evidence(row: dict) -> str:
    """How allocated memory moves, or that the log does not say."""
    if row["allocated_slope_per_day"] is None:
        return "the log states no allocated memory, so a leak cannot be told from allocator cache"
    return f"allocated after requests rises {row['allocated_slope_per_day']:.1%} a day"


def _advice(row: dict, cache: bool) -> str:
    """What to do before the crossing."""
    when = row["date_95"] or row["date_80"]
    if row["growth"] == "held":
        return (
            f"Held memory keeps growing: log allocated memory after each request (torch.cuda.memory_allocated()) "
            f"to tell a leak from allocator cache, and restart or roll back before {when:%Y-%m-%d %H:%M} UTC."
        )
    if cache:
        return (
            "Allocator cache growth, not a leak: tensors stay flat, so PyTorch will reuse the cache "
            f"before failing, but memory alerts will fire. Call {row['remedy']}, or alert on allocated memory "
            "instead."
        )
    return (
        f"Memory that requests leave behind keeps growing: find what holds it (see the leak findings for "
        f"{row['model_version']}) and restart or roll back before {when:%Y-%m-%d %H:%M} UTC."
    )
