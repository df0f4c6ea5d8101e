"""The library facade the CLI calls: one function per command."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from .analyses.findings import Finding
from .config import IngestOptions
from .errors import DatabaseError
from .ingest import IngestReport, Progress, ingest_paths
from .load import connect


def ingest(db_path: str | Path, paths: list[str], options: IngestOptions,
           progress: Progress | None = None) -> IngestReport:
    """Ingest files and directories into the database at `db_path`."""
    con = connect(db_path)
    try:
        return ingest_paths(con, paths, options, progress)
    finally:
        con.close()


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows of a query."""

    columns: list[str]
    rows: list[tuple[object, ...]]


def query(db_path: str | Path, sql: str, params: list[object] | None = None) -> QueryResult:
    """Run one SQL statement read-only against the database."""
    con = connect(db_path, read_only=True)
    try:
        cursor = con.execute(sql, params or [])
        columns = [d[0] for d in cursor.description] if cursor.description else []
        return QueryResult(columns, cursor.fetchall() if columns else [])
    except duckdb.Error as exc:
        raise DatabaseError(f"query failed: {str(exc).splitlines()[0]}") from exc
    finally:
        con.close()


def findings(db_path: str | Path, since: datetime | None = None, until: datetime | None = None) -> list[Finding]:
    """Every analysis's findings over [since, until], most important first."""
    from .analyses.all_findings import collect_findings

    con = connect(db_path, read_only=True)
    try:
        return collect_findings(con, since, until)
    finally:
        con.close()


def sources(db_path: str | Path) -> QueryResult:
    """What was ingested, oldest first."""
    return query(db_path, "SELECT * FROM rpt_sources")
