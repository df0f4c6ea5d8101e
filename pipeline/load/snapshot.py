"""Put a read snapshot into DuckDB: one function shared by `oomlab ingest` and the no-DB `inspect`."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from ..assets import scratch_dir
from ..parse.snapshot.read import SnapshotData, SnapshotMeta, read_snapshot
from .connection import connect
from .sql import apply_schema, run_file
from .trace_writer import TraceWriter

# Tables filled from the SnapshotData attribute of the same name (snapshot_ooms from `ooms`); the Arrow
# column names are the SQL column names.
DETAIL_TABLES = ("segments", "blocks", "trace_events", "stacks", "frames", "snapshot_ooms")
_SOURCE_ATTR = {"snapshot_ooms": "ooms"}


@dataclass(frozen=True)
class SnapshotLabels:
    """What the user said about a snapshot: the labels `--instance`, `--model-version`, `--tag k=v`."""

    instance: str | None = None
    model_version: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


def load_snapshot(
    con: duckdb.DuckDBPyConnection,
    path: str | Path,
    snapshot_id: int,
    source_id: int | None = None,
    labels: SnapshotLabels | None = None,
) -> SnapshotMeta:
    """Read the snapshot at `path` into the database under `snapshot_id`, its trace streamed in as it is read
    (so memory holds a chunk of it, not the whole); its facts. Run it in a transaction: a file that fails
    half-way leaves rows behind that its rollback removes."""
    data = read_snapshot(path, TraceWriter(con, snapshot_id))
    insert_snapshot(con, data, snapshot_id, source_id, labels)
    return data.meta


def insert_snapshot(
    con: duckdb.DuckDBPyConnection,
    data: SnapshotData,
    snapshot_id: int,
    source_id: int | None = None,
    labels: SnapshotLabels | None = None,
) -> None:
    """Insert one snapshot's tables under `snapshot_id`, straight from Arrow (no row-by-row Python); a trace
    already streamed in (`trace_events` None) is left as it is."""
    labels = labels or SnapshotLabels()
    run_file(con, "insert_snapshot", _snapshot_row(data, snapshot_id, source_id, labels))
    for table in DETAIL_TABLES:
        rows = getattr(data, _SOURCE_ATTR.get(table, table))
        if rows is not None:
            _insert_arrow(con, table, rows, snapshot_id)


def delete_source_snapshots(con: duckdb.DuckDBPyConnection, source_id: int) -> None:
    """Remove the detail rows of a source's snapshots (keyed by snapshot_id, not source_id)."""
    for table in DETAIL_TABLES:
        # Table names come from this module's constant, never from input.
        con.execute(
            f"DELETE FROM {table} WHERE snapshot_id IN "
            "(SELECT snapshot_id FROM snapshots WHERE source_id = $source_id)",
            {"source_id": source_id},
        )


def inspect_connection(data: SnapshotData, snapshot_id: int = 1) -> duckdb.DuckDBPyConnection:
    """An in-memory database holding the schema and this one snapshot, already read whole."""
    con = duckdb.connect(":memory:")
    apply_schema(con)
    insert_snapshot(con, data, snapshot_id)
    return con


@contextmanager
def scratch_database() -> Iterator[duckdb.DuckDBPyConnection]:
    """A database of oomlab's schema in a temporary directory, removed on exit: what `snapshot inspect` and
    `diff` load their files into. A file, not `:memory:`, so that DuckDB keeps to oomlab's memory limit and
    spills the trace to disk rather than holding every row of it."""
    with tempfile.TemporaryDirectory(prefix="snapshot-", dir=scratch_dir()) as scratch:
        con = connect(Path(scratch) / "snapshots.duckdb")
        try:
            yield con
        finally:
            con.close()


def _insert_arrow(con: duckdb.DuckDBPyConnection, table: str, rows: pa.Table, snapshot_id: int) -> None:
    """`INSERT INTO table SELECT snapshot_id, *` over an Arrow table registered as a view (zero copy)."""
    view = f"_oomlab_arrow_{table}"
    con.register(view, rows)
    try:
        columns = ", ".join(rows.column_names)
        # Identifiers come from this module's constants and the Arrow schema we built, never from input.
        con.execute(
            f"INSERT INTO {table} (snapshot_id, {columns}) SELECT $snapshot_id, {columns} FROM {view}",
            {"snapshot_id": snapshot_id},
        )
    finally:
        con.unregister(view)


def _snapshot_row(
    data: SnapshotData, snapshot_id: int, source_id: int | None, labels: SnapshotLabels
) -> dict[str, object]:
    """The `snapshots` row: the parameters of sql/ingest/insert_snapshot.sql, named as its columns."""
    m = data.meta
    return {
        "snapshot_id": snapshot_id,
        "source_id": source_id,
        "path": m.path,
        "instance": labels.instance,
        "model_version": labels.model_version,
        "tags": json.dumps(dict(labels.tags)),
        "format": m.format,
        "legacy_shapes": list(m.legacy_shapes),
        "device": m.devices[0] if m.devices else None,
        "devices": list(m.devices),
        "allocator_settings": _json_or_none(m.allocator_settings),
        "alloc_conf": m.alloc_conf,
        "expandable_segments": m.expandable_segments,
        "first_time_us": m.first_time_us,
        "last_time_us": m.last_time_us,
        "segment_count": m.segment_count,
        "block_count": m.block_count,
        "trace_event_count": m.trace_event_count,
        "oom_count": m.oom_count,
        "stack_count": m.stack_count,
        "allocated_bytes": m.allocated_bytes,
        "active_bytes": m.active_bytes,
        "reserved_bytes": m.reserved_bytes,
        "requested_bytes": m.requested_bytes,
        "external_annotations": json.dumps(list(m.external_annotations), default=str),
    }


def _json_or_none(value: object) -> str | None:
    return None if value is None else json.dumps(value, default=str)
