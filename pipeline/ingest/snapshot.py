"""Snapshots: read safely, load the snapshot tables, and one oom_events row per `oom` trace entry."""

from __future__ import annotations

from pathlib import Path

import duckdb

from ..config import IngestOptions
from ..load import tables as load
from ..load.snapshot import SnapshotLabels, insert_snapshot
from ..load.sql import run_file
from ..parse.snapshot.read import read_snapshot


def ingest_snapshot(
    con: duckdb.DuckDBPyConnection, path: Path, source_id: int, options: IngestOptions
) -> tuple[int, int]:
    """Load one snapshot file; returns (rows, rejects) where rows counts blocks plus trace events."""
    data = read_snapshot(path)
    snapshot_id = int(load.scalar(con, "SELECT nextval('snapshot_ids')"))  # type: ignore[arg-type]
    labels = SnapshotLabels(options.instance_for(path), options.model_version, options.tags)
    insert_snapshot(con, data, snapshot_id, source_id, labels)
    run_file(con, "insert_snapshot_ooms", {"source_id": source_id, "snapshot_id": snapshot_id})
    return data.blocks.num_rows + data.trace_events.num_rows, 0
