"""The data-quality note that `oomlab findings` and the weekly report lead with, in words a user can act on.

Not a Finding: a finding explains OOMs and is ranked by the OOMs it explains, while this says how far the
data behind every finding can be trusted, so it comes before all of them whatever their impact (and ranking
stays impact x confidence). It is written only when something was set aside, flagged or left out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import duckdb

from ..analyses.data_quality import FLAGGED, KEPT, LEFT_OUT, SET_ASIDE, DataQuality, QualityCount, data_quality

REJECTS_QUERY = "oomlab query 'SELECT * FROM rejects'"
FLAGS_QUERY = "oomlab query 'SELECT * FROM fct_request_flags'"


@dataclass(frozen=True)
class DataQualityNote:
    """The note's text and the counts it was written from (q_data_quality's rows)."""

    text: str
    set_aside_rows: int
    counts: tuple[QualityCount, ...]

    def to_json(self) -> dict[str, Any]:
        """The documented JSON shape (docs/findings.md, "data_quality")."""
        return {"note": self.text, "set_aside_rows": self.set_aside_rows, "counts": [asdict(c) for c in self.counts]}


# What each handling says of its rows, and what follows the list (q_data_quality's handlings, in the note's order).
_PHRASES: dict[str, tuple[str, str]] = {
    SET_ASIDE: ("set aside", f"; see `{REJECTS_QUERY}`"),
    LEFT_OUT: (
        "loaded by an earlier version left out of water levels",
        " (ingest their files into a new database to set them aside)",
    ),
    KEPT: ("contradict(s) themselves", "; such a message is kept and counted, but no card size is taken from it"),
    FLAGGED: ("kept but implausible", f"; see `{FLAGS_QUERY}`"),
}


def data_quality_note(con: duckdb.DuckDBPyConnection) -> DataQualityNote | None:
    """The note over the whole database, or None when its data is clean."""
    quality = data_quality(con)
    if quality.clean:
        return None
    sentences = [text for handling in _PHRASES if (text := _sentence(quality, handling)) is not None]
    return DataQualityNote("data quality: " + "; ".join(sentences), quality.rows(SET_ASIDE), quality.counts)


def _sentence(quality: DataQuality, handling: str) -> str | None:
    """'312 request rows of 3 files set aside (impossible values: 290 allocated above the card, ...); see ...'."""
    totals = quality.totals(handling)
    if not totals:
        return None
    verb, tail = _PHRASES[handling]
    parts = [
        f"{_rows_of_files(t)} {_agreed(verb, t.rows)} ({_reasons(quality.categories(handling, t.what))})"
        for t in totals
    ]
    return _joined(parts) + tail


def _agreed(verb: str, rows: int) -> str:
    """'contradict(s) themselves' as one row or many say it."""
    if "(s)" not in verb:
        return verb
    return verb.replace("(s)", "s").replace("themselves", "itself") if rows == 1 else verb.replace("(s)", "")


def _reasons(categories: list[QualityCount]) -> str:
    """'290 allocated above the card, 22 reserved below allocated'; rows set aside for both reasons say which
    is which: 'impossible values: 290 allocated above the card; unreadable: 3 invalid JSON'."""
    impossible = [f"{c.rows:,} {c.category}" for c in categories if c.impossible]
    unreadable = [f"{c.rows:,} {c.category}" for c in categories if not c.impossible]
    if categories[0].handling != SET_ASIDE:
        return ", ".join(impossible + unreadable)
    groups = [("impossible values: ", impossible), ("unreadable: ", unreadable)]
    return "; ".join(label + ", ".join(items) for label, items in groups if items)


def _rows_of_files(total: QualityCount) -> str:
    """'312 request rows of 3 files', '1 telemetry sample of 1 file'."""
    what = total.what if total.rows != 1 else total.what.removesuffix("s")
    return f"{total.rows:,} {what} of {total.files:,} file{'s' if total.files != 1 else ''}"


def _joined(parts: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
