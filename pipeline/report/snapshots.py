"""Snapshots as the reports show them: which ones fall in a window, and their top sites."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb

from ..load.sql import sql_text
from ..units import file_name

TOP_SITES = 10


def snapshots_in_window(
    con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None
) -> list[dict[str, Any]]:
    """Snapshots whose trace ends in [since, until), newest first (file name only: paths are local)."""
    rows = con.sql(sql_text("q_report_snapshots"), params={"since": since, "until": until}).pl().to_dicts()
    for row in rows:
        row["file"] = file_name(row.pop("path"))
    return rows


def top_sites(con: duckdb.DuckDBPyConnection, snapshot_ids: list[int], top: int = TOP_SITES) -> list[dict[str, Any]]:
    """The allocation sites holding the most live bytes in each snapshot."""
    if not snapshot_ids:
        return []
    params = {"snapshot_ids": snapshot_ids, "top": top}
    return con.sql(sql_text("q_report_top_sites"), params=params).pl().to_dicts()
