"""Snapshots as the reports show them: which ones fall in a window, their top sites, a leak's likely site."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb

from ..analyses.snapshot.leaks import leak_suspects
from ..analyses.snapshot.series import instance_series
from ..load.sql import sql_text
from .formatting import file_name

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


def leak_site(con: duckdb.DuckDBPyConnection, instances: list[str]) -> dict[str, Any] | None:
    """The strongest leak suspect in the newest snapshot of any of `instances` (judged with the earlier ones
    of its instance), or None."""
    for snapshot in snapshots_in_window(con, None, None):
        if snapshot["instance"] in instances:
            snapshot_id = snapshot["snapshot_id"]
            suspects = leak_suspects(con, snapshot_id, series=instance_series(con, snapshot_id))
            if not suspects.is_empty():
                best = suspects.row(0, named=True)
                return {
                    "site": best["site"],
                    "caller": best["caller"],
                    "live_bytes": best["live_bytes"],
                    "confidence": best["confidence"],
                    "file": snapshot["file"],
                    "snapshot_id": snapshot["snapshot_id"],
                }
    return None
