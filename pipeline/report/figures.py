"""Plotly figures as plain JSON: one base layout, units on every axis, values the browser can read.

Figures are validated by plotly's graph objects and then reduced to dicts, so the page embeds only data
(plotly.js is embedded once by the HTML layer).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

import plotly.graph_objects as go

from ..load.settings import ALERT_LEVELS
from ..units import GIB

# The memory alert levels (notice, warning, critical: ALERT_LEVELS) drawn as bands, each up to the next level
# or the full card, darker the closer to an OOM.
_BAND_COLORS = ("rgba(255, 200, 0, 0.10)", "rgba(255, 120, 0, 0.13)", "rgba(220, 0, 0, 0.14)")
LEVEL_BANDS: tuple[tuple[float, float, str], ...] = tuple(
    zip(ALERT_LEVELS, (*ALERT_LEVELS[1:], 1.0), _BAND_COLORS, strict=True)
)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
OOM_COLOR = "#d62728"


def base_layout(x_title: str, y_title: str, height: int = 360, **extra: Any) -> dict[str, Any]:
    """A compact layout readable at 1366x768; both axis titles carry their unit."""
    layout: dict[str, Any] = {
        "height": height,
        "margin": {"l": 64, "r": 24, "t": 28, "b": 56},
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        # tick labels flat or upright, never slanted: a slanted label's box covers its neighbours', and on a narrow
        # page plotly's slant was not enough to keep bucket names apart
        "xaxis": {"title": {"text": x_title}, "gridcolor": "#eee", "zeroline": False, "autotickangles": [0, 90]},
        "yaxis": {"title": {"text": y_title}, "gridcolor": "#eee", "zeroline": False},
        # above the plot: a legend below it met the x axis title wherever narrow pages stack ticks (420 px)
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        "hovermode": "closest",
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(layout.get(key), dict):
            layout[key] = {**layout[key], **value}
        else:
            layout[key] = value
    return layout


def figure(traces: Iterable[dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    """A validated figure as JSON-ready dicts (plotly rejects a misspelt property here, not in the browser)."""
    fig = go.Figure(data=[plain(t) for t in traces], layout=plain(layout))
    return plain(fig.to_plotly_json())


def plain(value: Any) -> Any:
    """Values JSON and plotly.js understand: ISO times, no NaN, stable floats, lists instead of arrays."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float):
        # 10 significant digits: DuckDB's parallel sums differ in the last bits from run to run, and a
        # report must be byte-identical for the same input.
        return None if math.isnan(value) or math.isinf(value) else float(f"{value:.10g}")
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return plain(value.tolist())
    return value


def level_bands(x0: Any, x1: Any) -> list[dict[str, Any]]:
    """Shaded bands of the alert levels (70/85/95 %) across [x0, x1] on a 0-1 (fraction of the device) y axis."""
    return [
        {
            "type": "rect",
            "xref": "x",
            "yref": "y",
            "x0": x0,
            "x1": x1,
            "y0": low,
            "y1": high,
            "fillcolor": color,
            "line": {"width": 0},
            "layer": "below",
        }
        for low, high, color in LEVEL_BANDS
    ]


def gib(values: Iterable[float | int | None]) -> list[float | None]:
    """Bytes as GiB for an axis labelled GiB."""
    return [None if v is None else round(v / GIB, 4) for v in values]
