"""periodic_window findings: hours of the day when OOMs cluster beyond their traffic, recurring day after day."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from ..analyses.fleet.periodicity import MIN_RATIO, periodic_windows
from ..analyses.fleet.rate_tests import format_p, poisson_excess_p
from .finding import Finding, Window


def findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """A `periodic_window` finding per recurring window no calendar job or neighbour process explains (same
    hours: one finding)."""
    windows = periodic_windows(con, since, until).filter(pl.col("recurring"))
    groups = windows.group_by(["start_hour", "end_hour", "window_utc"], maintain_order=True).agg(
        pl.col("instance"),
        pl.col("ooms").sum(),
        pl.col("expected").sum(),
        pl.col("excess_ooms").sum(),
        pl.col("days").max(),
        pl.col("days_above").max(),
        pl.col("recurrence").min(),
    )
    return [_finding(row) for row in groups.sort("start_hour").to_dicts()]


def _finding(row: dict) -> Finding:
    """The finding of one window on its hosts."""
    hosts = ", ".join(row["instance"])
    ratio = row["ooms"] / row["expected"] if row["expected"] > 0 else None
    p_value = poisson_excess_p(row["ooms"], row["expected"])
    subject = f"window {row['window_utc']} UTC on {hosts}"
    evidence = (
        f"Every day {row['window_utc']} UTC on {hosts}: {row['ooms']} OOMs against "
        f"{row['expected']:.1f} expected from traffic ({_ratio(ratio)}, p {format_p(p_value)}); at "
        f"least {MIN_RATIO:g}x its usual rate on {row['days_above']} of {row['days']} days. No "
        f"scheduled job in the calendar, and no neighbour process on the card, explains it."
    )
    return Finding(
        kind="periodic_window",
        subject=subject,
        evidence=evidence,
        advice=f"Find what runs at {row['window_utc']} UTC on hosts {hosts} (cron, backups, batch jobs), "
        f"add it to the calendar, and move it or the traffic apart.",
        confidence=round(min(0.9, 0.5 + 0.4 * row["recurrence"]), 2),
        impact=round(row["excess_ooms"], 1),
        window=Window(recurring=f"daily {row['window_utc']} UTC"),
        metrics={
            "window_utc": row["window_utc"],
            "hosts": row["instance"],
            "ooms": row["ooms"],
            "expected": row["expected"],
            "ratio": ratio,
            "p_value": p_value,
            "excess_ooms": row["excess_ooms"],
            "days": row["days"],
            "days_above": row["days_above"],
            "recurrence": row["recurrence"],
        },
    )


def _ratio(ratio: float | None) -> str:
    return "no OOM expected" if ratio is None else f"{ratio:.1f}x"
