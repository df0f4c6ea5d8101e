"""Sizing by the article's rules (the action per device; findings/sizing.py words it) over the card table (cards.py).

Rules (docs/domain.md): keep the steady level under 60 %; consider a larger card when the daily peak stays above
80 % for two weeks, a smaller one when it stays under 40 % (and no request ran out of memory in those weeks:
the logged peaks missed that one); size at 1.3-1.5 x the measured peak. The peak of
a day is the most a request held (`peak_allocated`, or reserved when higher) over the card's total; the
measured peak adds the process's CUDA context (not in PyTorch's counters), read from its OOM messages
(`this process has` minus PyTorch's share) or 1 GiB when it has none (docs/domain.md's upper estimate).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import duckdb
import polars as pl

from ...cards import CARDS, Card, card_name
from ...load.sql import sql_text
from ...units import GIB
from ..window import window_params
from .card_names import with_device_cards
from .water_levels import water_levels
from .whole_history import water_hours_once

LOOKBACK_DAYS = 14
MIN_DAYS_SEEN = 12  # of the 14: a day without traffic (an outage, a holiday) does not reset the count
UPGRADE_LEVEL = 0.80
DOWNSIZE_LEVEL = 0.40
STEADY_TARGET = 0.60
SAFETY = (1.3, 1.5)
DEFAULT_CONTEXT_BYTES = GIB


def smallest_card(need_bytes: float) -> Card | None:
    """The smallest card (by total, then the faster) holding `need_bytes`, or None when none does."""
    fitting = [c for c in CARDS if c.total_bytes >= need_bytes]
    return min(fitting, key=lambda c: (c.total_bytes, -c.bandwidth_gbs)) if fitting else None


def daily_peaks(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """Per device and UTC day: the peak level (whatever held more), the allocated-only peak, the peak bytes,
    OOMs and requests."""
    water_hours_once(con)
    return con.sql(sql_text("q_sizing_daily_peaks"), params=window_params(since, until)).pl()


def context_bytes(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """Per device: the memory its process holds outside PyTorch (CUDA context, libraries), from its
    OOM messages."""
    return con.sql(sql_text("q_sizing_context"), params=window_params(since, until)).pl()


def sizing(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """Per device: the last 14 days' daily peaks, the measured peak with its context, the action
    (`upgrade`, `downsize`, `fix_allocator`, `keep`, `too_little_history` or `no_memory_levels`) and the card that
    fits."""
    peaks = daily_peaks(con, since, until)
    if peaks.is_empty():
        return pl.DataFrame()
    context = context_bytes(con, since, until)
    steady = _steady_levels(con, since, until)
    rows = [
        _advise(key, group, context, steady)
        for key, group in peaks.group_by("instance", "gpu_index", maintain_order=True)
    ]
    return with_device_cards(con, pl.DataFrame(rows).sort("instance", "gpu_index"))


def _steady_levels(
    con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None
) -> dict[tuple[str, int], float]:
    """Per device: the time-weighted median held level (water_levels' `steady_level`)."""
    levels = water_levels(con, since, until)
    return {(r["instance"], r["gpu_index"]): r["steady_level"] for r in levels.iter_rows(named=True)}


def _advise(
    key: tuple, days: pl.DataFrame, context: pl.DataFrame, steady: dict[tuple[str, int], float]
) -> dict[str, object]:
    """One device's sizing row. Only the days whose requests stated a memory level are evidence: a request log
    may state the card's size and no level at all (allocated_before alone, say), and such a day has no peak to
    hold against 80 % or 40 %; a device with no such day gets `no_memory_levels` and no card."""
    instance, gpu_index = key
    measured = days.filter(pl.col("peak_level").is_not_null())
    last_day: date = (measured if measured.height else days)["day"].max()  # type: ignore[assignment]
    first_day = last_day - timedelta(days=LOOKBACK_DAYS - 1)
    recent = measured.filter(pl.col("day") >= first_day)
    ctx = context.filter((pl.col("instance") == instance) & (pl.col("gpu_index") == gpu_index))
    ctx_bytes = int(ctx["context_bytes"][0]) if ctx.height else DEFAULT_CONTEXT_BYTES
    total = int(days["device_total"].max())  # type: ignore[arg-type]
    ooms = int(days.filter(pl.col("day") >= first_day)["ooms"].sum())
    action = _action(measured, recent, first_day, ooms) if measured.height else "no_memory_levels"
    # An allocator fix frees the reserved-but-unallocated part: size on what was allocated.
    column = "peak_allocated_bytes" if action == "fix_allocator" else "peak_bytes"
    highest = recent[column].max()
    peak = None if highest is None else int(highest) + ctx_bytes  # type: ignore[arg-type]
    card = None if peak is None else smallest_card(SAFETY[0] * peak)
    return {
        "instance": instance,
        "gpu_index": gpu_index,
        "card": card_name(total),
        "device_total": total,
        "lookback_start": first_day,
        "lookback_end": last_day,
        "days_seen": recent.height,
        "days_above_80": int((recent["peak_level"] >= UPGRADE_LEVEL).sum()),
        "days_below_40": int((recent["peak_level"] < DOWNSIZE_LEVEL).sum()),
        "peak_level": _highest(recent["peak_level"]),
        "allocated_peak_level": _highest(recent["allocated_peak_level"]),
        "steady_level": steady.get((instance, gpu_index)),
        "context_bytes": ctx_bytes,
        "measured_peak_bytes": peak,
        "action": action,
        "target_card": None if card is None else card.label,
        "target_total_bytes": None if card is None else card.total_bytes,
        "target_margin": None if card is None or peak is None else card.total_bytes / peak,
        "ooms_in_lookback": ooms,
    }


def _highest(levels: pl.Series) -> float | None:
    """The highest of the daily levels, None when no day states one."""
    top = levels.max()
    return None if top is None else float(top)  # type: ignore[arg-type]


def _action(days: pl.DataFrame, recent: pl.DataFrame, first_day: date, ooms: int) -> str:
    """The article's rule for these daily peaks (days that state a peak level), and `ooms` in the lookback."""
    if days["day"].min() > first_day or recent.height < MIN_DAYS_SEEN:  # type: ignore[operator]
        return "too_little_history"
    if (recent["peak_level"] >= UPGRADE_LEVEL).all():
        # Reserved-but-unallocated memory (allocator cache, fragmentation) is not a reason to buy memory. A log
        # that states no peak_allocated cannot tell the two apart: the article's rule alone then decides.
        allocated = recent["allocated_peak_level"].drop_nulls()
        if allocated.is_empty():
            return "upgrade"
        return "upgrade" if (allocated >= UPGRADE_LEVEL).mean() >= 0.5 else "fix_allocator"  # type: ignore[operator]
    # An OOM is a request that did not fit in what the card had free, whatever held the rest (a peak the log
    # does not state, as one without peak_allocated states only levels between requests; a neighbour): a
    # smaller card would fail more often, so a card that ran out is never advised smaller.
    if (recent["peak_level"] < DOWNSIZE_LEVEL).all() and ooms == 0:
        return "downsize"
    return "keep"
