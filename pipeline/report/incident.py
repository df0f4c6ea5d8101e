"""`oomlab report incident`: one OOM's page and its JSON."""

from __future__ import annotations

from datetime import datetime

import duckdb

from .document import Report
from .html import render
from .incident_charts import incident_charts
from .incident_data import incident_data


def incident_report(
    con: duckdb.DuckDBPyConnection, event_id: int | None = None, instance: str | None = None, at: datetime | None = None
) -> Report:
    """The incident report of one OOM (by event id, or the OOM of `instance` nearest to `at`)."""
    doc = incident_data(con, event_id, instance, at)
    return Report(doc, render("incident.html.j2", doc, incident_charts(doc)))
