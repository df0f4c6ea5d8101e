"""`oomlab report weekly`: the weekly review page and its JSON."""

from __future__ import annotations

from datetime import datetime

import duckdb

from .document import Report
from .html import render
from .weekly_charts import weekly_charts
from .weekly_data import weekly_data


def weekly_report(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> Report:
    """The weekly report over [since, until) (default: the last 7 days of data)."""
    doc = weekly_data(con, since, until)
    return Report(doc, render("weekly.html.j2", doc, weekly_charts(doc)))
