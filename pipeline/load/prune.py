"""`oomlab prune`: delete every row dated before a moment, in one transaction, and count them per table."""

from __future__ import annotations

from datetime import datetime

import duckdb

from .sql import rollback, run_file, sql_text


def prune_before(con: duckdb.DuckDBPyConnection, before: datetime) -> dict[str, int]:
    """Delete the rows dated before `before` (naive UTC) from every table with a time column; returns the rows
    deleted per table (sql/ingest/prune_counts.sql says which). All or nothing: one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        run_file(con, "prune_cutoff", {"before": before})
        counts = {name: int(n) for name, n in con.execute(sql_text("prune_counts")).fetchall()}
        run_file(con, "prune_rows")
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        raise
    return counts
