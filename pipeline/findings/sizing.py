"""sizing findings: devices to move to a larger or smaller card, or whose allocator fills it (the article's rules)."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import duckdb
import polars as pl

from ..analyses.fleet.allocator_settings import allocator_settings, settings_for
from ..analyses.fleet.sizing import SAFETY, sizing
from ..units import GIB, format_bytes
from .allocator_advice import cache_advice
from .finding import Finding, Window


def findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """`sizing` findings for devices to upgrade, downsize, or whose allocator fills the card.

    impact: for an upgrade or allocator fix, the device's OOMs in the 14 days (what the move addresses);
    a downsize prevents no OOM and has impact 0 (it saves money, it is ranked last).
    """
    table = sizing(con, since, until)
    if table.is_empty():
        return []
    acted = table.filter(pl.col("action").is_in(["upgrade", "downsize", "fix_allocator"]))
    sightings = allocator_settings(con, until)
    out = []
    for row in acted.iter_rows(named=True):
        finding = _finding(_with_settings(row, sightings))
        if finding is not None:
            out.append(finding)
    return out


def _with_settings(row: dict, sightings: pl.DataFrame) -> dict:
    """An allocator fix's row with the allocator settings its device ran with at the end of the lookback and the
    remedy they leave (`allocator_settings`, `allocator_step`); other rows as they are."""
    if row["action"] != "fix_allocator":
        return row
    end = datetime.combine(row["lookback_end"] + timedelta(days=1), datetime.min.time())
    return {**row, **cache_advice(settings_for(sightings, [row["instance"]], end), option_first=True)}


def _finding(row: dict) -> Finding | None:
    """The sizing finding for one device's row, or None when a downsize finds no smaller card."""
    target = row["target_card"]
    smaller = row["target_total_bytes"] is not None and row["target_total_bytes"] < row["device_total"]
    if row["action"] == "downsize" and not smaller:
        return None
    subject = row["instance"] if row["gpu_index"] == 0 else f"{row['instance']} GPU {row['gpu_index']}"
    return Finding(
        kind="sizing",
        subject=subject,
        evidence=_evidence(row),
        advice=_advice(row, target),
        confidence={"upgrade": 0.8, "downsize": 0.7, "fix_allocator": 0.5}[row["action"]],
        impact=0.0 if row["action"] == "downsize" else float(row["ooms_in_lookback"]),
        window=Window(
            datetime.combine(row["lookback_start"], datetime.min.time()),
            datetime.combine(row["lookback_end"] + timedelta(days=1), datetime.min.time()),
        ),
        metrics={k: (v.isoformat() if isinstance(v, date) else v) for k, v in row.items() if k != "remedy"},
    )


def _evidence(row: dict) -> str:
    """What the rule saw."""
    steady = row["steady_level"]
    steady_text = "" if steady is None else f"; steady level {steady:.0%} (target under 60 %)"
    peak_kind = "allocated peak" if row["action"] == "fix_allocator" else "measured peak"
    return (
        f"{row['card']}: the daily peak was {row['peak_level']:.0%} at most over "
        f"{row['lookback_start']}..{row['lookback_end']}, above 80 % on {row['days_above_80']} and under "
        f"40 % on {row['days_below_40']} of {row['days_seen']} days seen ({_allocated_text(row)}){steady_text}; "
        f"{peak_kind} "
        f"{format_bytes(row['measured_peak_bytes'], 'GiB')} including {format_bytes(row['context_bytes'], 'GiB')} of "
        f"CUDA context; "
        f"{row['ooms_in_lookback']} OOMs in those days."
    )


def _allocated_text(row: dict) -> str:
    """The allocated-only peak, or that the log states none (no peak_allocated)."""
    level = row["allocated_peak_level"]
    return "the log states no allocated peak" if level is None else f"allocated alone peaked at {level:.0%}"


def _advice(row: dict, target: str | None) -> str:
    """What to do, with the card sized at 1.3-1.5 x the measured peak."""
    peak_kind = "allocated peak" if row["action"] == "fix_allocator" else "measured peak"
    need = (
        f"1.3-1.5 x the {peak_kind} is {SAFETY[0] * row['measured_peak_bytes'] / GIB:.1f}-"
        f"{format_bytes(SAFETY[1] * row['measured_peak_bytes'], 'GiB', 1)}"
    )
    fit = (
        "no card in the table holds it"
        if target is None
        else f"the smallest card that fits is {target} ({row['target_margin']:.2f} x the peak)"
    )
    if row["device_total"] >= SAFETY[0] * row["measured_peak_bytes"]:
        fit = f"the current card holds {row['device_total'] / row['measured_peak_bytes']:.2f} x it"
    if row["action"] == "fix_allocator":
        return (
            "Do not buy memory yet: the card is full of reserved-but-unallocated memory, not of tensors. "
            f"Try {row['remedy']}, then size again ({need}; {fit})."
        )
    verb = "Move to a larger card" if row["action"] == "upgrade" else "Move to a smaller card"
    return f"{verb}: {need}; {fit}."
