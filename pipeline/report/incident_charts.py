"""The incident report's figures, drawn from its document (incident_data)."""

from __future__ import annotations

from typing import Any

from .figures import OOM_COLOR, PALETTE, base_layout, figure, gib
from .weekly_charts import sites_chart


def incident_charts(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Chart id -> figure for the sections that have data."""
    charts: dict[str, dict[str, Any] | None] = {
        "timeline": timeline_chart(doc["timeline"], doc["event"]) if doc["timeline"] else None
    }
    snapshot = doc["snapshot"]
    if snapshot:
        charts["replay"] = replay_chart(snapshot["timeline"]) if snapshot["timeline"] else None
        charts["sites"] = sites_chart(snapshot["top_sites"]) if snapshot["top_sites"] else None
    return {name: chart for name, chart in charts.items() if chart is not None}


def timeline_chart(tl: dict[str, Any], event: dict[str, Any]) -> dict[str, Any] | None:
    """Memory after each request and its peak, the limit (cap or card), OOMs (red lines) and scheduled jobs
    (shaded); the axis spans the data, within the hours around the OOM."""
    req, seen = tl["requests"], tl["telemetry"]
    if not req["ts"] and not tl["ooms"]["ts"] and not seen["ts"]:
        return None
    traces = [
        _line("allocated after request", req["ts"], gib(req["allocated_after"]), PALETTE[0]),
        _line("reserved after request", req["ts"], gib(req["reserved_after"]), PALETTE[1]),
        {
            "type": "scatter",
            "mode": "markers",
            "name": "peak during request",
            "x": req["ts"],
            "y": gib(req["peak_allocated"]),
            "marker": {"color": PALETTE[2], "size": 4},
            "hovertemplate": "%{x}<br>peak %{y:.2f} GiB<extra></extra>",
        },
    ]
    if seen["ts"]:
        traces.append(_line("device used (nvidia-smi / DCGM)", seen["ts"], gib(seen["memory_used_bytes"]), PALETTE[4]))
    ooms = tl["ooms"]
    if any(v is not None for v in ooms["requested_bytes"]):
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "OOM: size requested",
                "x": ooms["ts"],
                "y": gib(ooms["requested_bytes"]),
                "marker": {"symbol": "x", "color": OOM_COLOR, "size": 9},
                "hovertemplate": "OOM %{x}<br>tried to allocate %{y:.3f} GiB<extra></extra>",
            }
        )
    limit, label = (
        (event.get("cap_bytes"), "per-process cap")
        if event.get("cap_bytes")
        else (event.get("device_total_bytes"), "device total")
    )
    if limit and req["ts"]:
        traces.append(
            {
                **_line(label, [req["ts"][0], req["ts"][-1]], gib([limit, limit]), "#444"),
                "line": {"color": "#444", "dash": "dot", "width": 1},
            }
        )
    shapes = []
    for at, eid in zip(tl["ooms"]["ts"], tl["ooms"]["event_id"], strict=True):
        mine = eid == event["event_id"]
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": at,
                "x1": at,
                "y0": 0,
                "y1": 1,
                "line": {"color": OOM_COLOR, "width": 2.5 if mine else 1, "dash": "solid" if mine else "dot"},
            }
        )
    # each job shaded in its own colour and named once in the legend: names written at the top of the plot
    # overprinted each other where two jobs overlap, and met the legend
    colors = _job_colors(tl["jobs"])
    for job in tl["jobs"]:
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": job["start_ts"],
                "x1": job["end_ts"],
                "y0": 0,
                "y1": 1,
                "fillcolor": _shade(colors[job["name"]]),
                "line": {"width": 0},
                "layer": "below",
            }
        )
    traces += [_job_key(name, color) for name, color in colors.items()]
    layout = base_layout("time (UTC)", "memory (GiB)", height=400, shapes=shapes)
    return figure(traces, layout)


# Job shades: the palette's colours but red (red marks OOMs on this chart).
_JOB_COLORS = tuple(c for c in PALETTE if c != OOM_COLOR)


def _job_colors(jobs: list[dict[str, Any]]) -> dict[str, str]:
    names = list(dict.fromkeys(job["name"] for job in jobs))
    return {name: _JOB_COLORS[(i + 4) % len(_JOB_COLORS)] for i, name in enumerate(names)}


def _shade(color: str) -> str:
    """`#rrggbb` as a light fill (rgba, 15 % opaque) that the lines stay readable over."""
    red, green, blue = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red}, {green}, {blue}, 0.15)"


def _job_key(name: str, color: str) -> dict[str, Any]:
    """A legend entry for a job's shaded windows (a square marker with no point to draw)."""
    return {
        "type": "scatter",
        "mode": "markers",
        "name": f"job {name} (shaded)",
        "x": [None],
        "y": [None],
        "marker": {"symbol": "square", "size": 12, "color": _shade(color).replace("0.15)", "0.45)")},
        "hoverinfo": "skip",
    }


def replay_chart(replay: dict[str, Any]) -> dict[str, Any]:
    """Allocated and reserved bytes replayed from the snapshot's trace, OOM moments in red."""
    traces = [
        _line("allocated", replay["time"], gib(replay["allocated_bytes"]), PALETTE[0]),
        _line("reserved", replay["time"], gib(replay["reserved_bytes"]), PALETTE[1]),
    ]
    shapes = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": t,
            "x1": t,
            "y0": 0,
            "y1": 1,
            "line": {"color": OOM_COLOR, "width": 2},
        }
        for t in replay["oom_times"]
    ]
    return figure(traces, base_layout("time (UTC)", "memory (GiB)", height=340, shapes=shapes))


def _line(name: str, x: list[Any], y: list[float | None], color: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": x,
        "y": y,
        "line": {"color": color, "width": 1.5},
        "hovertemplate": f"{name}<br>%{{x}}<br>%{{y:.2f}} GiB<extra></extra>",
    }
