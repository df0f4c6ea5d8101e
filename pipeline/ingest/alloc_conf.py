"""The allocator settings a process stated into allocator_settings: the lines of a text log that set
PYTORCH_CUDA_ALLOC_CONF (read during the log's OOM scan, see ingest/text.py) and the `alloc_conf` field of a
request log's lines (written by oomlab.capture)."""

from __future__ import annotations

from datetime import datetime

import duckdb

from ..load import tables as load
from ..load.sql import sql_text
from ..parse.alloc_conf import StatedSettings, parse_alloc_conf

_COLUMNS = ("source_id", "line", "ts", "instance", "setting", "value")


def insert_stated(con: duckdb.DuckDBPyConnection, found: list[StatedSettings], source_id: int, instance: str) -> int:
    """Append the settings a text log's lines state; returns the rows added."""
    rows = [(source_id, s.line, s.ts, instance, setting, value) for s in found for setting, value in s.settings]
    return _insert(con, rows)


def insert_request_settings(con: duckdb.DuckDBPyConnection, source_id: int) -> int:
    """Append the settings a request log's lines carry (`alloc_conf`): each configuration an instance of the file
    ran with, at its first line; returns the rows added."""
    found = load.fetch_dicts(con, "select_request_alloc_conf", {"source_id": source_id})
    rows = [
        (source_id, r["line"], r["ts"], r["instance"], setting, value)
        for r in found
        for setting, value in parse_alloc_conf(str(r["alloc_conf"]))
    ]
    return _insert(con, rows)


def _insert(
    con: duckdb.DuckDBPyConnection, rows: list[tuple[int, int | None, datetime | None, str | None, str, str]]
) -> int:
    if rows:
        con.executemany(sql_text("insert_allocator_settings"), rows)
    return len(rows)
