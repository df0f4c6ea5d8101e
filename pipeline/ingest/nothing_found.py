"""What a file that yielded nothing was searched for: every source ends with facts, rejects, or this note."""

from __future__ import annotations

from pathlib import Path

from ..parse import detect
from ..parse.facts import line_count

# What each kind of input is read for (the tables it would fill).
_LOOKED_FOR: dict[str, str] = {
    detect.TEXT: "OOM message, engine start-up memory report or memory_summary() table",
    detect.JSONL: "request row",
    detect.JSON_ARRAY: "request row",
    detect.CSV: "request row",
    detect.PARQUET: "request row",
    detect.SNAPSHOT: "segment, block or trace event",
    detect.CALENDAR: "scheduled job",
    detect.MEMORY_STATS: "allocator counter",
    detect.PROMETHEUS: "GPU or serving-engine metric",
}


def nothing_found_note(path: Path, kind: str) -> str:
    """`nothing found: a text file of 1,204 lines, no OOM message, ...`: its kind, lines read, what was looked
    for."""
    looked_for = _LOOKED_FOR.get(kind, "GPU or process sample")
    try:
        lines = f" of {line_count(path):,} lines"
    except (OSError, EOFError, ValueError):  # counted only for the note: a file that cannot be re-read has none
        lines = ""
    return f"nothing found: a {kind} file{lines}, no {looked_for}"
