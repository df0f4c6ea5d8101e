"""`OUT/index.html`: every week's pages kept in the output folder, newest first, with its headline numbers."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from ..assets import write_atomic
from .weeks import WEEK_NAME


def week_folders(out: Path) -> list[Path]:
    """The week folders (`2026-W48`) under `out`, oldest first; a symbolic link named like one is not a week
    folder (the job made none: it is neither listed, written through nor deleted)."""
    if not out.is_dir():
        return []
    return sorted(p for p in out.iterdir() if WEEK_NAME.match(p.name) and p.is_dir() and not p.is_symlink())


def headline_of(doc: dict[str, Any]) -> dict[str, Any]:
    """A weekly JSON's headline as metric -> this week's value."""
    return {h["metric"]: h["current"] for h in doc.get("headline", [])}


def write_index(out: Path) -> Path:
    """Write `out/index.html` from each week folder's weekly.json (a folder without one is listed bare)."""
    rows, labels = [], {}
    for folder in reversed(week_folders(out)):
        try:
            doc = json.loads((folder / "weekly.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            doc = {}
        labels |= {h["metric"]: h["label"] for h in doc.get("headline", [])}
        incidents = sorted(p.name for p in folder.glob("incident-*.html"))
        rows.append((folder.name, headline_of(doc), len(doc.get("findings", [])), incidents))
    metrics = list(labels)
    head = "".join(f"<th>{escape(labels[m])}</th>" for m in metrics)
    body = []
    for name, numbers, found, incidents in rows:
        cells = "".join(f'<td class="num">{escape(_number(numbers.get(m)))}</td>' for m in metrics)
        links = " ".join(
            f'<a href="{escape(name)}/{escape(i)}">{escape(i.removesuffix(".html"))}</a>' for i in incidents
        )
        body.append(
            f'<tr><td><a href="{escape(name)}/weekly.html">{escape(name)}</a></td>{cells}'
            f'<td class="num">{found}</td><td>{links}</td></tr>'
        )
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>oomlab weekly reviews</title>\n'
        "<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}.num{text-align:right}</style>\n"
        "</head>\n<body>\n<h1>GPU out-of-memory reviews</h1>\n"
        f"<table>\n<thead><tr><th>week</th>{head}<th>findings</th><th>incidents</th></tr></thead>\n<tbody>\n"
        + "\n".join(body)
        + "\n</tbody>\n</table>\n</body>\n</html>\n"
    )
    return write_atomic(out / "index.html", page)


def _number(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)
