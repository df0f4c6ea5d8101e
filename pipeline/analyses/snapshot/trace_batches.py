"""A snapshot's trace read in bounded batches, in trace order, so an analysis over a trace of any length holds
one batch at a time (issue 15: memory bounded by a chunk, not by the trace)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

# Rows per batch, at most. A trace event read by an analysis is a handful of numbers and a short string: a
# million of them is tens of MB in polars, small beside a 24 GB machine, and large enough that per-batch
# overhead (a join, a group-by) stays a small part of the time. DuckDB (2.0) hands out fewer when its result
# comes in smaller pieces (122,880 rows per batch, measured on the leak query over a 21M-event trace).
BATCH_ROWS = 1 << 20


@dataclass(frozen=True)
class Span:
    """How many events a query covers and the range of their x (time_us, else seq) over which they are binned."""

    rows: int
    low: float
    high: float

    def bins(self, count: int) -> pl.Expr:
        """Each row's bin of `count` equal bins over this span, as `downsample` and the leak windows cut them."""
        x = pl.coalesce("time_us", "seq").cast(pl.Float64)
        return ((x - self.low) / (self.high - self.low + 1) * count).floor().cast(pl.Int64)


def span(con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any]) -> Span:
    """The Span a SQL query reports (one row: count, low x, high x)."""
    rows, low, high = con.sql(query, params=params).fetchall()[0]
    return Span(int(rows or 0), float(low or 0.0), float(high or 0.0))


def batches(
    con: duckdb.DuckDBPyConnection, query: str, params: dict[str, Any], batch_rows: int = BATCH_ROWS
) -> Iterator[pl.DataFrame]:
    """The rows of a SQL query, in its order, as polars frames of at most `batch_rows` rows. DuckDB
    streams the result, so only the batch in hand (and DuckDB's own spillable buffers) is held."""
    reader = con.sql(query, params=params).to_arrow_reader(batch_rows)
    for batch in reader:
        if batch.num_rows:
            yield _compact_strings(pl.from_arrow(batch))  # type: ignore[arg-type]


def _compact_strings(frame: pl.DataFrame) -> pl.DataFrame:
    """String columns as Categorical. A polars string is a view into its batch's buffers, so a few rows grouped
    or picked from a batch and kept would keep the whole batch alive: measured on a 21M-event trace, keeping
    each batch's per-site sums grew memory by 10 MB a batch, and not at all with Categorical (codes into one
    shared dictionary). Callers cast back to String what they return."""
    return frame.with_columns(pl.col(pl.String).cast(pl.Categorical))
