"""Opening the DuckDB file: the session settings, this version's schema, and the lock-down of a connection that
runs someone's SQL. Kept apart from the inserts of `tables` (which re-exports these) so that a command that only
reads, such as `oomlab sources`, loads DuckDB and the SQL files and nothing of the parse or ingest stages."""

from __future__ import annotations

from pathlib import Path

import duckdb

from ..errors import DatabaseBusyError, DatabaseError
from .sql import apply_schema, schema_outdated


def connect(db_path: str | Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the database with this version's schema: created or brought up to date on a read-write
    connection. A read-only one to a database an earlier version wrote updates its schema first, on a
    short read-write connection (views and macros are replaced, new ones created; no row changes), since
    the queries of this version name them. A held lock is DatabaseBusyError."""
    db_path = str(db_path)
    if read_only and not Path(db_path).exists():
        raise DatabaseError(f"no database at {db_path}", hint="run `oomlab ingest` first or pass --db")
    con = _open(db_path, read_only)
    try:
        if not read_only:
            apply_schema(con)
        elif schema_outdated(con):
            con.close()
            _update_schema(db_path)
            con = _open(db_path, read_only=True)
    except BaseException:
        con.close()
        raise
    return con


def _update_schema(db_path: str) -> None:
    """Apply this version's schema to a database an earlier version wrote."""
    try:
        con = _open(db_path, read_only=False)
    except DatabaseBusyError:
        raise
    except (DatabaseError, duckdb.Error) as exc:  # read-only file, or open read-only elsewhere in this process
        reason = exc.reason if isinstance(exc, DatabaseError) else str(exc)
        raise DatabaseError(
            f"{db_path} was written by an earlier oomlab and its schema cannot be updated: {reason}",
            hint="open it once where it is writable (any oomlab command does), or ingest into a new database",
        ) from exc
    try:
        apply_schema(con)
    finally:
        con.close()


def _open(db_path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the session settings every stage expects."""
    try:
        con = duckdb.connect(db_path, read_only=read_only)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise DatabaseBusyError(db_path) from exc
        raise DatabaseError(f"cannot open database {db_path}: {exc}") from exc
    con.execute(_SESSION)
    return con


# One statement list, one round trip. Progress is tracked for query_progress() (the CLI's bar) but DuckDB never
# prints its own. Rows carry their line numbers, so their physical order does not matter; inserts run in parallel.
_SESSION = (
    "SET TimeZone = 'UTC'; "
    "SET enable_progress_bar = true; "
    "SET enable_progress_bar_print = false; "
    "SET preserve_insertion_order = false"
)


# What a connection that runs someone's SQL may not do: touch any file but the database (COPY TO, read_csv,
# glob, ATTACH, EXPORT DATABASE), install or load extensions (INSTALL httpfs reaches the network), or change
# settings (the lock comes last: it keeps the others from being turned back on).
_LOCKDOWN = (
    "SET enable_external_access = false",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
    "SET lock_configuration = true",
)


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """Make a read-only connection read the database and nothing else, for the rest of its life."""
    con.execute("; ".join(_LOCKDOWN))  # in order, in one call: the lock comes last
