"""What PyTorch's allocator said about itself into allocator_stats: a memory_stats() JSON file, or the
memory_summary() tables of a text log (read during the log's OOM scan, see ingest/text.py)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ..config import IngestOptions
from ..errors import InputError
from ..parse.allocator import ROW_COLUMNS, AllocatorMoment, moment_rows, read_stats_json
from ..parse.compression import read_head
from .telemetry import insert_rows

if TYPE_CHECKING:
    from .job import LoadJob

# A memory_stats() dict has about 120 keys (a few KiB); a file far larger is not one, and is not read whole.
MAX_STATS_BYTES = 1 << 20
_LABELS = ("source_id", "line", "moment", "ts", "instance", "gpu_index", "origin")


def load_job(job: LoadJob) -> tuple[int, int]:
    """A memory_stats() file's loader (parse/formats.py)."""
    return ingest_memory_stats(job.con, job.path, job.source_id, job.options)


def ingest_memory_stats(
    con: duckdb.DuckDBPyConnection, path: Path, source_id: int, options: IngestOptions
) -> tuple[int, int]:
    """One memory_stats() JSON file: its moment's rows; returns (rows, rejects)."""
    head = read_head(path, MAX_STATS_BYTES + 1)
    if len(head) > MAX_STATS_BYTES:
        raise InputError(str(path), f"larger than {MAX_STATS_BYTES:,} bytes: not a memory_stats() dict")
    stats = read_stats_json(head.decode("utf-8", errors="replace"))
    if stats is None:
        raise InputError(str(path), "not a memory_stats() JSON object (no allocated_bytes.all.current)")
    moment = AllocatorMoment(1, "memory_stats", ts=options.at, stats=stats)
    return insert_moments(con, [moment], source_id, options.instance_for(path), options.at), 0


def insert_moments(
    con: duckdb.DuckDBPyConnection,
    moments: list[AllocatorMoment],
    source_id: int,
    instance: str,
    at: datetime | None = None,
) -> int:
    """Append the rows of some moments to allocator_stats; returns how many. A moment without a time of its
    own gets `at` (--at)."""
    rows = [
        {
            "source_id": source_id,
            "line": moment.line,
            "moment": number,
            "ts": moment.ts or at,
            "instance": instance,
            "gpu_index": moment.gpu_index,
            "origin": moment.origin,
            **row,
        }
        for number, moment in enumerate(moments, start=1)
        for row in moment_rows(moment)
    ]
    return insert_rows(con, "allocator_stats", rows, (*_LABELS, *ROW_COLUMNS))
