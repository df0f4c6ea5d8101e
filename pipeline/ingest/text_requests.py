"""A text log's request lines (parse/text/request_line.py) into text_requests: what the device served, and how
large, where no request log says it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb

from ..load.sql import sql_text
from ..parse.text.request_line import SIZES
from ..records import Reject
from .plausible import RAW_LIMIT, implausible_time

if TYPE_CHECKING:
    import polars as pl


def insert_text_requests(
    con: duckdb.DuckDBPyConnection,
    found: pl.DataFrame | None,
    source_id: int,
    instance: str,
    model_version: str | None = None,
) -> tuple[int, list[Reject]]:
    """Append the request lines found in one text log (`RequestScanner.take()`; `model_version`: --model-version,
    before the line's own); returns the rows added, and a reject for each line dated where no GPU log can be
    (ingest/plausible.py)."""
    if found is None or found.is_empty():
        return 0, []
    import polars as pl

    dated = pl.col("text").is_null()  # RequestScanner keeps the text of the lines dated where no log can be
    wrong = found.filter(~dated)
    rejects = [
        Reject(line, str(implausible_time(ts)), text[:RAW_LIMIT])
        for line, ts, text in wrong.select("line", "ts", "text").iter_rows()
    ]
    rows = found.filter(dated).select(
        pl.lit(source_id, pl.Int32).alias("source_id"),
        pl.col("line").cast(pl.Int64),
        pl.col("ts").cast(pl.Datetime("us")),
        pl.lit(instance, pl.Utf8).alias("instance"),
        (pl.lit(model_version, pl.Utf8) if model_version else pl.col("model_version")).alias("model_version"),
        "request_id",
        "status",
        "succeeded",
        pl.col("latency_ms").cast(pl.Float64),
        *(pl.col(name).cast(pl.Int64) for name in sorted(SIZES)),
    )
    con.register("new_text_requests", rows.to_arrow())
    try:
        con.execute(sql_text("insert_text_requests"))
    finally:
        con.unregister("new_text_requests")
    return rows.height, rejects
