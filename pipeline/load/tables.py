"""Load stage: the DuckDB file, one transaction per source, and inserts into the schema's tables."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import duckdb

if TYPE_CHECKING:
    import pyarrow as pa

from ..parse.facts import HASH_ALGORITHM
from ..records import OomMessage, Reject
from .connection import connect, lock_down  # noqa: F401  (where the other stages have always found them)
from .sql import bind, run_file, sql_text


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> object:
    """The first value of the first row, or None; the result is read to its end, as DuckDB requires."""
    rows = con.execute(sql, params).fetchall()
    return rows[0][0] if rows else None


def tables_with_source_id(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every base table that holds rows of a source (they all carry `source_id`)."""
    rows = con.execute(
        "SELECT DISTINCT c.table_name FROM information_schema.columns c "
        "JOIN information_schema.tables t USING (table_schema, table_name) "
        "WHERE c.column_name = 'source_id' AND t.table_type = 'BASE TABLE' AND c.table_name <> 'sources' "
        "AND c.table_schema = 'main' ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


def remove_source_rows(con: duckdb.DuckDBPyConnection, source_id: int) -> None:
    """Delete every row a source contributed, in every table."""
    from .snapshot import delete_source_snapshots  # the snapshot modules load only when needed

    delete_source_snapshots(con, source_id)  # before `snapshots`, which maps its rows to the source
    for table in tables_with_source_id(con):
        con.execute(f'DELETE FROM "{table}" WHERE source_id = $source_id', {"source_id": source_id})


def remove_sources(con: duckdb.DuckDBPyConnection, source_ids: Iterable[int]) -> None:
    """Delete sources and every row they contributed."""
    for source_id in source_ids:
        remove_source_rows(con, source_id)
        run_file(con, "delete_source", {"source_id": source_id})


def source_ids_for_path(con: duckdb.DuckDBPyConnection, path: str) -> list[int]:
    return [r[0] for r in con.execute("SELECT source_id FROM sources WHERE path = $path", {"path": path}).fetchall()]


def source_with_hash(con: duckdb.DuckDBPyConnection, content_hash: str, algorithm: str = HASH_ALGORITHM) -> str | None:
    """The path of an already ingested source with this content (its digest under `algorithm`), if any."""
    query = "SELECT path FROM sources WHERE content_hash = $hash AND hash_algorithm = $algorithm LIMIT 1"
    return scalar(con, query, {"hash": content_hash, "algorithm": algorithm})  # type: ignore[return-value]


def source_with_hash_on(con: duckdb.DuckDBPyConnection, content_hash: str, instance: str) -> str | None:
    """The path of an already ingested source with this content and the instance label `instance`, if any."""
    query = (
        "SELECT path FROM sources WHERE content_hash = $hash AND hash_algorithm = $algorithm "
        "AND json_extract_string(labels, '$.instance') = $instance LIMIT 1"
    )
    params = {"hash": content_hash, "algorithm": HASH_ALGORITHM, "instance": instance}
    return scalar(con, query, params)  # type: ignore[return-value]


def upgrade_hash(con: duckdb.DuckDBPyConnection, path: str, content_hash: str) -> None:
    """Store the HASH_ALGORITHM digest of a source an earlier version hashed with sha256 (found unchanged), so
    that copies of it under other paths are recognised from now on."""
    con.execute(
        "UPDATE sources SET content_hash = $hash, hash_algorithm = $algorithm WHERE path = $path",
        {"hash": content_hash, "algorithm": HASH_ALGORITHM, "path": path},
    )


def labels_of(con: duckdb.DuckDBPyConnection, path: str) -> dict[str, object] | None:
    """The labels the source at `path` was ingested with (None when there is none)."""
    text = scalar(con, "SELECT CAST(labels AS VARCHAR) FROM sources WHERE path = $path LIMIT 1", {"path": path})
    return None if text is None else json.loads(str(text))


def known_file(con: duckdb.DuckDBPyConnection, path: str, size: int) -> str | None:
    """The hash algorithm of the source at this path with this size, when there is one (worth hashing before
    any work); None otherwise."""
    query = "SELECT hash_algorithm FROM sources WHERE path = $path AND size_bytes = $size LIMIT 1"
    return scalar(con, query, {"path": path, "size": size})  # type: ignore[return-value]


def next_source_id(con: duckdb.DuckDBPyConnection) -> int:
    """A source id never used before in this database, even by a replaced source."""
    return int(scalar(con, "SELECT nextval('source_ids')"))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class SourceRow:
    """The bookkeeping of one ingested file."""

    source_id: int
    path: str
    content_hash: str  # parse/facts.HASH_ALGORITHM
    kind: str
    rows: int
    rejects: int
    size_bytes: int
    labels: dict[str, object]
    note: str | None = None  # why it yielded nothing, when it did not


def insert_source(con: duckdb.DuckDBPyConnection, src: SourceRow) -> None:
    run_file(
        con,
        "insert_source",
        {
            "source_id": src.source_id,
            "path": src.path,
            "content_hash": src.content_hash,
            "hash_algorithm": HASH_ALGORITHM,
            "kind": src.kind,
            "ingested_at": datetime.now(UTC).replace(tzinfo=None),
            "rows": src.rows,
            "rejects": src.rejects,
            "size_bytes": src.size_bytes,
            "labels": json.dumps(src.labels, sort_keys=True),
            "note": src.note,
        },
    )


def insert_rejects(con: duckdb.DuckDBPyConnection, source_id: int, rejects: list[Reject]) -> int:
    """Append rejects found outside SQL; returns how many."""
    if not rejects:
        return 0
    import pyarrow as pa  # here, not at the top: a run over clean request logs never needs it

    schema = pa.schema([("source_id", pa.int32()), ("line", pa.int64()), ("reason", pa.string()), ("raw", pa.string())])
    table = pa.table(
        {
            "source_id": [source_id] * len(rejects),
            "line": [r.line for r in rejects],
            "reason": [r.reason for r in rejects],
            "raw": [r.raw for r in rejects],
        },
        schema=schema,
    )
    con.register("new_rejects", table)
    con.execute("INSERT INTO rejects SELECT * FROM new_rejects")
    con.unregister("new_rejects")
    return len(rejects)


OOM_COLUMNS: tuple[str, ...] = (
    "source_id",
    "line",
    "ts",
    "instance",
    "gpu_index",
    "model_version",
    "framework",
    "origin",
    "requested_bytes",
    "total_capacity_bytes",
    "free_bytes",
    "already_allocated_bytes",
    "reserved_bytes",
    "allocated_by_pytorch_bytes",
    "reserved_unallocated_bytes",
    "process_in_use_bytes",
    "allowed_bytes",
    "private_pool_bytes",
    "other_processes",
    "batch_size",
    "input_sequence_length",
    "output_sequence_length",
    "message",
    "request_id",
)
_INT32 = frozenset({"source_id", "gpu_index"})
_TEXT = frozenset({"instance", "model_version", "framework", "origin", "message", "request_id", "error"})


# OomMessage attributes stored under their own names.
_MESSAGE_COLUMNS = (
    "framework",
    "requested_bytes",
    "total_capacity_bytes",
    "free_bytes",
    "already_allocated_bytes",
    "reserved_bytes",
    "allocated_by_pytorch_bytes",
    "reserved_unallocated_bytes",
    "process_in_use_bytes",
    "allowed_bytes",
    "private_pool_bytes",
    "gpu_index",
    "message",
)
MESSAGE_COLUMNS = (*_MESSAGE_COLUMNS, "other_processes")  # the oom_events columns an OomMessage fills

Columns = dict[str, list[object]]  # one list per column, all of one length


def message_columns(ooms: Sequence[OomMessage]) -> Columns:
    """The oom_events columns that OOM messages fill, column by column (a large log holds thousands)."""
    columns: Columns = {name: [getattr(oom, name) for oom in ooms] for name in _MESSAGE_COLUMNS}
    columns["other_processes"] = [[{"pid": p, "in_use_bytes": b} for p, b in oom.other_processes] for oom in ooms]
    return columns


def insert_oom_events(con: duckdb.DuckDBPyConnection, columns: Columns, count: int) -> int:
    """Append `count` OOM events given column by column (keys from OOM_COLUMNS; a missing column is NULL);
    returns how many."""
    if not count:
        return 0
    con.register("new_oom_events", _oom_table(columns, OOM_COLUMNS, count))
    cols = ", ".join(OOM_COLUMNS)
    con.execute(f"INSERT INTO oom_events ({cols}) SELECT {cols} FROM new_oom_events")
    con.unregister("new_oom_events")
    return count


def _oom_table(columns: Columns, names: tuple[str, ...], count: int) -> pa.Table:
    """Columns as an Arrow table with the oom_events column types (bytes and counts are int64)."""
    import pyarrow as pa  # here, not at the top: only runs that hold OOMs pay for importing it

    plain = {"INTEGER": pa.int32(), "VARCHAR": pa.string(), "TIMESTAMP": pa.timestamp("us"), "BIGINT": pa.int64()}

    def arrow_type(column: str) -> pa.DataType:
        if column == "other_processes":
            return pa.list_(pa.struct([("pid", pa.int64()), ("in_use_bytes", pa.int64())]))
        return plain[_sql_type(column)]

    schema = pa.schema([(c, arrow_type(c)) for c in names])
    return pa.table({c: columns.get(c, [None] * count) for c in names}, schema=schema)


def stage_parsed_messages(con: duckdb.DuckDBPyConnection, parsed: dict[str, OomMessage]) -> None:
    """Parsed OOM messages as the temporary table `parsed_messages` (keyed by `error`, the message text). One
    row per distinct message of a file, a handful as a rule: passed as list parameters and unnested by DuckDB,
    which costs less than importing pyarrow (0.05-0.1 s) for them."""
    columns = {"error": list(parsed), **message_columns(list(parsed.values()))}
    names = ("error", *MESSAGE_COLUMNS)
    select = ", ".join(f"CAST(unnest(${i}) AS {_sql_type(c)}) AS {c}" for i, c in enumerate(names, start=1))
    con.execute(f"CREATE OR REPLACE TEMP TABLE parsed_messages AS SELECT {select}", [columns[c] for c in names])


def _sql_type(column: str) -> str:
    """The oom_events type of a column: bytes and counts are BIGINT."""
    if column in _INT32:
        return "INTEGER"
    if column in _TEXT:
        return "VARCHAR"
    if column == "ts":
        return "TIMESTAMP"
    if column == "other_processes":
        return "STRUCT(pid BIGINT, in_use_bytes BIGINT)[]"
    return "BIGINT"


def fetch_dicts(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, object]) -> list[dict[str, object]]:
    """Run a SELECT from `sql/` and return its rows as dicts."""
    text = sql_text(name)
    cursor = con.execute(text, bind(text, params))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
