"""What a file that yielded nothing was searched for: every source ends with facts, rejects, or this note."""

from __future__ import annotations

from pathlib import Path

from ..parse import formats
from ..parse.facts import line_count


def nothing_found_note(path: Path, kind: str) -> str:
    """`nothing found: a text file of 1,204 lines, no OOM message, ...`: its kind, lines read, what was looked
    for."""
    looked_for = formats.BY_NAME[kind].looked_for
    try:
        lines = f" of {line_count(path):,} lines"
    except (OSError, EOFError, ValueError):  # counted only for the note: a file that cannot be re-read has none
        lines = ""
    return f"nothing found: a {kind} file{lines}, no {looked_for}"
