"""Terminal output of `oomlab report` and `oomlab demo`: what was written and where."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from .terminal import pipe_console

if TYPE_CHECKING:
    from ..api import DemoResult


def print_written(paths: list[Path]) -> None:
    """One line per file written, with its size."""
    console = pipe_console(soft_wrap=True, highlight=False)
    for path in paths:
        console.print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")


def say_latest(event: dict[str, Any]) -> None:
    """Which OOM an incident report asked for without --event or --instance explains: the latest (on stderr)."""
    when = "no time" if event.get("ts") is None else f"{event['ts']:%Y-%m-%d %H:%M:%S} UTC"
    where = event.get("instance") or "an unknown instance"
    print(f"oomlab: the latest OOM: event {event['event_id']} on {where} at {when}", file=sys.stderr, flush=True)


def say_step(line: str) -> None:
    """One step of a long command, as it starts, on stderr (stdout keeps the results)."""
    print(f"oomlab: {line} ...", file=sys.stderr, flush=True)


def print_demo(result: DemoResult, top: int = 5) -> None:
    """The demo's pages (each with what it shows) and its top findings with their actions."""
    console = pipe_console(soft_wrap=True, highlight=False)
    console.print(f"database: {result.db_path}")
    for page, what in result.pages:
        console.print(f"{page}: {what}")
    others = [path for path in result.written if path not in {page for page, _ in result.pages}]
    console.print(f"with the same data as JSON: {', '.join(path.name for path in others)}")
    table = Table(title=f"Top findings ({len(result.findings)} in all)", show_lines=False)
    for column in ("#", "what to do", "impact"):
        table.add_column(column)
    for finding in result.findings[:top]:
        table.add_row(str(finding["rank"]), str(finding["title"]), str(finding["impact_text"]))
    console.print(table)
    console.print(f"open {result.written[0]} in a browser for the weekly report")
