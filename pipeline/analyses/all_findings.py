"""Every fleet analysis's findings, collected and ranked: what `oomlab findings` prints."""

from __future__ import annotations

from datetime import datetime
from importlib import import_module

import duckdb

from .findings import Finding, rank

# The analyses that report findings, each a module of this package with
# `findings(con, since, until) -> list[Finding]`.
ANALYSES: tuple[str, ...] = ("classify", "leaks", "jobs", "periodicity", "prompt_risk", "water_levels", "forecast")


def collect_findings(con: duckdb.DuckDBPyConnection, since: datetime | None = None,
                     until: datetime | None = None) -> list[Finding]:
    """All findings over [since, until], most important first."""
    found: list[Finding] = []
    for name in ANALYSES:
        module = import_module(f".{name}", __package__)
        found.extend(module.findings(con, since, until))
    return rank(found)
