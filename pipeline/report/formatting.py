"""How numbers read in a report: binary units for memory, thousands separators, signed changes, UTC times."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..findings.wording import cause_words, confidence_text
from ..units import format_bytes

MISSING = "\u2013"  # an en dash: an unknown value, not zero


def size(value: float | int | None) -> str:
    """Bytes in the largest binary unit that keeps the number >= 1 (PyTorch's style: 1.67 GiB)."""
    return MISSING if value is None else format_bytes(value)


def number(value: float | int | None, digits: int = 0) -> str:
    """1234567 -> 1,234,567; None -> MISSING."""
    if value is None:
        return MISSING
    return f"{value:,.{digits}f}"


def percent(value: float | None, digits: int = 0) -> str:
    """0.853 -> 85 %."""
    return MISSING if value is None else f"{100 * value:.{digits}f} %"


def change(value: float | None, pct: float | None = None, digits: int = 0) -> str:
    """A signed change with its percentage: +12 (+8 %)."""
    if value is None:
        return MISSING
    text = f"{value:+,.{digits}f}"
    return f"{text} ({pct:+.0f} %)" if pct is not None else text


def moment(value: Any) -> str:
    """A stored (naive UTC) time or its ISO text as `2026-11-30 01:49 UTC`."""
    if value is None:
        return MISSING
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return f"{value:%Y-%m-%d %H:%M} UTC" if isinstance(value, datetime) else str(value)


FILTERS = {
    "size": size,
    "number": number,
    "percent": percent,
    "change": change,
    "moment": moment,
    "confidence": confidence_text,  # one format for confidence everywhere (findings.wording)
    "cause": cause_words,
}
