"""Where a leak finding's memory is held: the strongest leak suspect in a snapshot of one of its processes."""

from __future__ import annotations

from typing import Any

import duckdb

from ..analyses.snapshot.leaks import leak_suspects
from ..analyses.snapshot.series import instance_series
from ..load.sql import sql_text
from ..units import file_name


def leak_site(con: duckdb.DuckDBPyConnection, instances: list[str]) -> dict[str, Any] | None:
    """The strongest leak suspect in the newest snapshot of any of `instances` (judged with the earlier ones
    of its instance): its site, the service's own frame that called it, and the frames between; or None."""
    snapshots = con.sql(sql_text("q_report_snapshots"), params={"since": None, "until": None}).pl()
    for snapshot in snapshots.iter_rows(named=True):
        if snapshot["instance"] not in instances:
            continue
        snapshot_id = snapshot["snapshot_id"]
        suspects = leak_suspects(con, snapshot_id, series=instance_series(con, snapshot_id))
        if not suspects.is_empty():
            best = suspects.row(0, named=True)
            return {
                "site": best["site"],
                "caller": best["caller"],
                "stack": best["stack"],
                "live_bytes": best["live_bytes"],
                "confidence": best["confidence"],
                "file": file_name(snapshot["path"]),
                "snapshot_id": snapshot_id,
            }
    return None
