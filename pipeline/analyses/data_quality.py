"""Data quality: what ingest set aside and why, what it kept but flags, and what the levels leave out, counted.

Computed over the whole database (a reject is a row that could not be placed, often not even in time), from
q_data_quality. The words of the note that `oomlab findings` and the weekly report lead with are written by
oomlab.findings.data_quality.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from ..load.sql import sql_text

# What became of the rows counted, as q_data_quality names it.
SET_ASIDE, LEFT_OUT, KEPT, FLAGGED = "set aside", "left out", "kept", "flagged"


@dataclass(frozen=True)
class QualityCount:
    """Rows of one kind (`what`: request rows, telemetry samples, ...) handled one way, for one reason
    (`category`), or for all (`category` None: the total of `handling` x `what`)."""

    handling: str
    what: str
    category: str | None
    impossible: bool  # values no device can have, as opposed to input that could not be read
    rows: int
    files: int


@dataclass(frozen=True)
class DataQuality:
    """Every count of q_data_quality, totals before their categories."""

    counts: tuple[QualityCount, ...]

    @property
    def clean(self) -> bool:
        """Nothing was set aside, flagged or left out."""
        return not self.counts

    def totals(self, handling: str) -> list[QualityCount]:
        """The totals per kind of row handled one way."""
        return [c for c in self.counts if c.handling == handling and c.category is None]

    def categories(self, handling: str, what: str) -> list[QualityCount]:
        """The reasons behind one total, most rows first."""
        return [c for c in self.counts if c.handling == handling and c.what == what and c.category is not None]

    def rows(self, handling: str) -> int:
        """Rows handled one way, of every kind."""
        return sum(c.rows for c in self.totals(handling))


def data_quality(con: duckdb.DuckDBPyConnection) -> DataQuality:
    """What the database holds about its own data: rejects by reason, flagged and left-out rows."""
    rows = con.sql(sql_text("q_data_quality")).fetchall()
    return DataQuality(tuple(QualityCount(*row) for row in rows))
