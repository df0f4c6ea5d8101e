"""Snapshots: read safely, the trace streamed into the snapshot tables as it is read, and one oom_events row per
`oom` trace entry."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ..config import IngestOptions
from ..errors import InputError
from ..load import tables as load
from ..load.snapshot import SnapshotLabels, load_snapshot
from ..load.sql import run_file

if TYPE_CHECKING:
    from .job import LoadJob


def load_job(job: LoadJob) -> tuple[int, int]:
    """A snapshot's loader (parse/formats.py)."""
    return ingest_snapshot(job.con, job.path, job.source_id, job.options)


def ingest_snapshot(
    con: duckdb.DuckDBPyConnection, path: Path, source_id: int, options: IngestOptions
) -> tuple[int, int]:
    """Load one snapshot file; returns (rows, rejects) where rows counts blocks plus trace events. A snapshot
    too deep or too large to take in is this file's one-line error, never the end of the whole ingest."""
    snapshot_id = int(load.scalar(con, "SELECT nextval('snapshot_ids')"))  # type: ignore[arg-type]
    labels = SnapshotLabels(options.instance_for(path), options.model_version, options.tags)
    try:
        meta = load_snapshot(con, path, snapshot_id, source_id, labels)
    except RecursionError as exc:
        raise InputError(str(path), "not a PyTorch memory snapshot: it nests deeper than can be walked") from exc
    except MemoryError as exc:
        raise InputError(
            str(path), "not a PyTorch memory snapshot: it needs more memory than this machine has"
        ) from exc
    run_file(con, "insert_snapshot_ooms", {"source_id": source_id, "snapshot_id": snapshot_id})
    return meta.block_count + meta.trace_event_count, 0
