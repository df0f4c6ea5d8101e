"""A text log's request lines (parse/text/request_line.py) into text_requests: what the device served, and how
large, where no request log says it."""

from __future__ import annotations

import duckdb

from ..load.sql import sql_text
from ..parse.text.request_line import LoggedRequest, succeeded

_SIZES = ("batch_size", "input_sequence_length", "output_sequence_length")


def insert_text_requests(
    con: duckdb.DuckDBPyConnection,
    found: list[LoggedRequest],
    source_id: int,
    instance: str,
    model_version: str | None = None,
) -> int:
    """Append the request lines found in one text log (`model_version`: --model-version, before the line's own);
    returns the rows added."""
    if not found:
        return 0
    import pyarrow as pa  # here, not at the top: only logs that hold request lines pay for importing it

    fields = [r.fields for r in found]
    columns = {
        "source_id": pa.array([source_id] * len(found), pa.int32()),
        "line": pa.array([r.line for r in found], pa.int64()),
        "ts": pa.array([r.ts for r in found], pa.timestamp("us")),
        "instance": pa.array([instance] * len(found), pa.string()),
        "model_version": pa.array([model_version or f.get("model_version") for f in fields], pa.string()),
        "request_id": pa.array([f.get("request_id") for f in fields], pa.string()),
        "status": pa.array([f.get("status") for f in fields], pa.string()),
        "succeeded": pa.array([succeeded(f.get("status")) for f in fields], pa.bool_()),
        "latency_ms": pa.array([_number(f.get("latency_ms"), float) for f in fields], pa.float64()),
        **{name: pa.array([_number(f.get(name), int) for f in fields], pa.int64()) for name in _SIZES},
    }
    con.register("new_text_requests", pa.table(columns))
    try:
        con.execute(sql_text("insert_text_requests"))
    finally:
        con.unregister("new_text_requests")
    return len(found)


def _number(value: str | None, kind: type[int] | type[float]) -> int | float | None:
    """A size (int) or latency (float) as written: request_line keeps only plain decimals, whole ones for sizes."""
    return None if value is None else kind(value)
