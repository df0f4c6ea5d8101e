"""The weekly report's figures, drawn from its document (weekly_data)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..units import ooms_text
from .figures import GIB, OOM_COLOR, PALETTE, base_layout, figure, gib, level_bands

FORECAST_DAYS = 14
FEW_POINTS = 6
MAX_SITE_CHARTS = 3


def weekly_charts(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Chart id -> figure, for the charts that have data (a missing section leaves its chart out)."""
    charts = {
        "heatmap": heatmap_chart(doc["heatmap"], doc["jobs"]),
        "water": water_chart(doc["water"], doc["forecast"], doc["window"]) if doc["water"] else None,
        "versions": rate_chart(doc["rates"]["model_version"], "model version"),
        "prompt-input": rate_chart(doc["rates"]["input_length"], "prompt length bucket (tokens)"),
        "prompt-batch-tokens": rate_chart(doc["rates"]["batch_tokens"], "batch x tokens bucket (tokens)"),
        "leaks": leak_chart(doc["leaks"]) if doc["leaks"] else None,
    }
    for snapshot in doc["snapshots"][:MAX_SITE_CHARTS]:
        sites = [s for s in doc["top_sites"] if s["snapshot_id"] == snapshot["snapshot_id"]]
        if sites:
            charts[f"sites-{snapshot['snapshot_id']}"] = sites_chart(sites)
    return {name: chart for name, chart in charts.items() if chart is not None}


def heatmap_chart(grid: dict[str, Any], jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """OOM rate by hour x weekday, scheduled job windows outlined (red: a finding blames the job)."""
    hover = [
        [
            f"{grid['days'][d]} {h:02d}:00<br>{grid['requests'][d][h]:,} requests, {grid['ooms'][d][h]:,} OOMs"
            for h in range(24)
        ]
        for d in range(7)
    ]
    trace = {
        "type": "heatmap",
        "z": grid["rate"],
        "x": grid["hours"],
        "y": grid["days"],
        "text": hover,
        "hovertemplate": "%{text}<br>%{z:.2f} OOMs per 1,000 requests<extra></extra>",
        # white is no OOM: the scale starts at 0 whatever the data (with every cell 0, plotly's own range put
        # them mid-scale, a red for nothing)
        "colorscale": [[0.0, "#ffffff"], [0.25, "#fcbba1"], [0.5, "#fb6a4a"], [1.0, "#a50f15"]],
        "zmin": 0,
        "zmax": max([v for row in grid["rate"] for v in row if v is not None], default=0) or 1,
        "colorbar": {"title": {"text": "OOMs per<br>1,000 req."}},
        "hoverongaps": False,
    }
    shapes, keys = [], []
    for number, job in enumerate(jobs):
        style = _job_style(job, number)
        for day in job["weekdays"]:
            for start, end in job["spans"]:
                shapes.append(
                    {
                        "type": "rect",
                        "x0": start - 0.5,
                        "x1": min(end, 24) - 0.5,
                        "y0": day - 1.5,
                        "y1": day - 0.5,
                        "line": style,
                    }
                )
        if job["spans"]:
            keys.append(_job_key(job, style))
    # each job is named once, in the legend (its windows drawn in its own line style), not on the grid: names
    # written into the cells overprinted each other wherever two jobs share an hour
    layout = base_layout(
        "hour of day (UTC, h)",
        "day of week",
        height=380 + 20 * len(keys),
        shapes=shapes,
        yaxis={"autorange": "reversed"},
        xaxis={"range": [-0.5, 23.5]},
    )
    return figure([trace, *keys], layout)


# Job outlines: the blamed job's solid red; the others in the palette's colours (not red), each with its own
# dash, so that two jobs sharing an hour stay apart in the legend and on the grid.
_JOB_DASHES = ("dot", "dash", "dashdot", "longdash", "longdashdot")


def _job_style(job: dict[str, Any], number: int) -> dict[str, Any]:
    if job["blamed"]:
        return {"color": OOM_COLOR, "width": 2.5, "dash": "solid"}
    colors = [c for c in PALETTE if c != OOM_COLOR]
    return {"color": colors[number % len(colors)], "width": 1.5, "dash": _JOB_DASHES[number % len(_JOB_DASHES)]}


def _job_key(job: dict[str, Any], style: dict[str, Any]) -> dict[str, Any]:
    """A legend entry for a job's windows (a line with no points: only its key is drawn)."""
    return {
        "type": "scatter",
        "mode": "lines",
        "x": [None],
        "y": [None],
        "name": f"{job['name']} (blamed)" if job["blamed"] else job["name"],
        "line": style,
        "showlegend": True,
        "hoverinfo": "skip",
    }


def water_chart(
    series: list[dict[str, Any]], forecasts: list[dict[str, Any]], window: dict[str, str]
) -> dict[str, Any]:
    """Per device (a menu picks it; the highest peak first): hourly peak and held level with the 70/85/95 %
    bands, OOM hours marked, and the trend forecast of the allocated level; the time axis spans the reported
    week (and the forecast after it), so a capture of minutes is a point on its day, not an axis of
    milliseconds."""
    series = sorted(series, key=lambda s: (-max((v or 0) for v in s["peak_level"]), s["instance"], s["gpu_index"]))
    trends = {(f["instance"], f["gpu_index"]): f for f in forecasts}
    traces: list[dict[str, Any]] = []
    owners: list[int] = []
    for i, s in enumerate(series):
        device_traces = _device_water_traces(s, trends.get((s["instance"], s["gpu_index"])))
        traces += [{**t, "visible": i == 0} for t in device_traces]
        owners += [i] * len(device_traces)
    start = _time(window["since"])
    end = max([_time(window["until"])] + [_time(t["x"][-1]) for t in traces if t["name"] == "forecast"])
    layout = base_layout(
        "time (UTC)",
        "memory (% of the card)",
        height=420,
        shapes=level_bands(start, end),
        # a little room before the week: its first date label, centred on the corner, sat on the y axis's 0 %
        xaxis={"range": [start - (end - start) * 0.03, end], "type": "date"},
        yaxis={"tickformat": ".0%", "range": [0, 1.05]},
    )
    # the device menu is the page's own <select> (base.html.j2), not plotly's: a menu drawn inside the chart
    # sat on its legend at narrow widths
    menu = [{"label": _device(s), "visible": [owner == i for owner in owners]} for i, s in enumerate(series)]
    return {**figure(traces, layout), "menu": menu}


def _time(value: datetime | str) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def _device_water_traces(s: dict[str, Any], trend: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One device's lines: hourly peak, held level between requests, OOM hours and the forecast."""
    name = _device(s)
    mode = "lines" if len(s["hour"]) >= FEW_POINTS else "lines+markers"  # a lone hour is still visible
    traces = [
        {
            "type": "scatter",
            "mode": mode,
            "name": "peak during requests",
            "x": s["hour"],
            "y": s["peak_level"],
            "line": {"color": PALETTE[0], "width": 1},
            "hovertemplate": f"{name}<br>%{{x}}<br>peak %{{y:.1%}} of the card<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": mode,
            "name": "held between requests",
            "x": s["hour"],
            "y": s["held_level"],
            "line": {"color": PALETTE[1], "width": 2},
            "hovertemplate": f"{name}<br>%{{x}}<br>held %{{y:.1%}} of the card<extra></extra>",
        },
    ]
    if any(v is not None for v in s["device_level"]):
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "device used (telemetry)",
                "x": s["hour"],
                "y": s["device_level"],
                "line": {"color": PALETTE[4], "width": 1, "dash": "dot"},
                "connectgaps": False,
                "hovertemplate": f"{name}<br>%{{x}}<br>device %{{y:.1%}} used (all processes)<extra></extra>",
            }
        )
    oom_at = [(h, lv) for h, lv, n in zip(s["hour"], s["peak_level"], s["ooms"], strict=True) if n]
    if oom_at:
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "hour with an OOM",
                "x": [h for h, _ in oom_at],
                "y": [lv for _, lv in oom_at],
                "marker": {"symbol": "x", "color": OOM_COLOR, "size": 7},
                "hovertemplate": f"{name}: OOM in the hour of %{{x}}<extra></extra>",
            }
        )
    if trend and (trend.get("slope_per_day") or 0) > 0 and trend.get("level_now") is not None:
        x, y = _forecast_line(trend)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "forecast",
                "x": x,
                "y": y,
                "line": {"color": PALETTE[3], "dash": "dash", "width": 2},
                "hovertemplate": f"{name} forecast<br>%{{x}}: %{{y:.1%}}<extra></extra>",
            }
        )
    return traces


def _forecast_line(trend: dict[str, Any]) -> tuple[list[datetime], list[float]]:
    as_of = _time(trend["as_of"])
    days = list(range(FORECAST_DAYS + 1))
    levels = [min(1.0, trend["level_now"] + trend["slope_per_day"] * d) for d in days]
    return [as_of + timedelta(days=d) for d in days], levels


def _rate_label(row: dict[str, Any]) -> str:
    """The OOMs over a bar, and how many of them the rate counts where some are of instances without a request
    log (a bar of rate 0 under `47 OOMs` read as a contradiction)."""
    ooms, counted = row["ooms"], row.get("ooms_with_traffic", row["ooms"])
    return ooms_text(ooms) if counted == ooms else f"{ooms_text(ooms)} ({counted:,} in request logs)"


def rate_chart(rows: list[dict[str, Any]], x_title: str) -> dict[str, Any] | None:
    """OOM rate per 1,000 requests by one cut, the OOM count on each bar."""
    rows = [r for r in rows if r["key"] is not None]
    if not rows:
        return None
    keys = [str(r["key"]) for r in rows]
    trace = {
        "type": "bar",
        "x": keys,
        "y": [r["oom_rate_per_1k"] for r in rows],
        "marker": {"color": "#1f77b4"},
        "text": [_rate_label(r) for r in rows],
        "textposition": "outside",
        "customdata": [r["requests"] for r in rows],
        "hovertemplate": "%{x}<br>%{y:.2f} OOMs per 1,000 requests<br>%{customdata:,} requests<extra></extra>",
    }
    layout = base_layout(x_title, "OOMs per 1,000 requests", height=320, xaxis={"type": "category"})
    return figure([trace], layout)


def leak_chart(trends: list[dict[str, Any]]) -> dict[str, Any]:
    """Allocated memory after requests (windowed minimum) of each flagged process lifetime; for cache growth
    also its reserved memory (dashed, same colour): reserved climbing over a flat allocated is what tells
    cache growth from a leak, so both are drawn."""
    traces = []
    for i, t in enumerate(trends):
        name = f"{_device(t)} #{t['lifetime']} {t['model_version']}"
        color = PALETTE[i % len(PALETTE)]
        cache = t["kind"] == "cache growth"
        traces.append(
            _leak_line(
                f"{name}: allocated" + (" (flat: cache growth)" if cache else " (leak)"),
                t,
                "baseline_bytes",
                {"color": color, "dash": "solid", "width": 2},
            )
        )
        if cache and any(v is not None for v in t["reserved_bytes"]):
            traces.append(
                _leak_line(f"{name}: reserved", t, "reserved_bytes", {"color": color, "dash": "dash", "width": 1.5})
            )
    times = [_time(x) for t in trends for x in t["ts"]]
    start, end = (min(times), max(times)) if times else (None, None)
    xaxis = {} if start is None else {"range": [start - ((end - start) * 0.03 or timedelta(minutes=1)), end]}
    # the legend names every line; the chart grows with it so that, stacked on a narrow page, it stays above
    # the plot instead of over it
    layout = base_layout("time (UTC)", "memory after requests (GiB)", height=380 + 26 * len(traces), xaxis=xaxis)
    return figure(traces, layout)


def _leak_line(name: str, trend: dict[str, Any], column: str, line: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines+markers",
        "name": name,
        "x": trend["ts"],
        "y": gib(trend[column]),
        "marker": {"size": 4},
        "line": line,
        "hovertemplate": f"{name}<br>%{{x}}<br>%{{y:.2f}} GiB<extra></extra>",
    }


def sites_chart(sites: list[dict[str, Any]]) -> dict[str, Any]:
    """Live bytes by allocation site of one snapshot, largest at the top; each bar labelled with the shortest
    tail of its site's path that tells it from the others (the whole site in its hover)."""
    sites = sorted(sites, key=lambda s: s["rank"], reverse=True)
    labels = short_names([s["site"] for s in sites])
    trace = {
        "type": "bar",
        "orientation": "h",
        "y": labels,
        "x": [round(s["live_bytes"] / GIB, 4) for s in sites],
        "customdata": [s["site"] for s in sites],
        "marker": {"color": "#9467bd"},
        "text": [f"{s['share_of_allocated']:.0%}" for s in sites],
        "textposition": "outside",
        "cliponaxis": False,
        "hovertemplate": "%{customdata}<br>%{x:.3f} GiB live<extra></extra>",
    }
    layout = base_layout(
        "live memory (GiB)",
        "allocation site (file:function:line)",
        height=max(200, 90 + 28 * len(sites)),
        yaxis={"automargin": True, "type": "category"},
    )
    return figure([trace], layout)


def short_names(sites: list[str]) -> list[str]:
    """Each `path/file.py:function:line` as its file and what follows, with as many folders before it as
    it takes to tell two apart (a bar label, not a path: the full one is in the hover)."""
    parts = [site.replace("\\", "/").split("/") for site in sites]
    keep = [1] * len(sites)
    while True:
        labels = ["/".join(p[-k:]) for p, k in zip(parts, keep, strict=True)]
        clashes = {label for label in labels if labels.count(label) > 1}
        grow = [i for i, label in enumerate(labels) if label in clashes and keep[i] < len(parts[i])]
        if not grow:
            return labels
        for i in grow:
            keep[i] += 1


def _device(row: dict[str, Any]) -> str:
    gpu = row.get("gpu_index")
    return f"{row['instance']}" + (f" gpu{gpu}" if gpu not in (None, 0) else "")
