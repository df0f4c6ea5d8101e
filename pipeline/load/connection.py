"""Opening the DuckDB file: the session settings, this version's schema, and the lock-down of a connection that
runs someone's SQL. Kept apart from the inserts of `tables` (which re-exports these) so that a command that only
reads, such as `oomlab sources`, loads DuckDB and the SQL files and nothing of the parse or ingest stages."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ..errors import DatabaseBusyError, DatabaseError
from .sql import apply_schema, schema_fingerprint, schema_outdated

CACHE_ENV = "OOMLAB_CACHE_DIR"  # where the empty-schema template lives (default: $XDG_CACHE_HOME/oomlab); "off": none


def connect(db_path: str | Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the database with this version's schema: created or brought up to date on a read-write
    connection. A read-only one to a database an earlier version wrote updates its schema first, on a
    short read-write connection (views and macros are replaced, new ones created; no row changes), since
    the queries of this version name them. A held lock is DatabaseBusyError."""
    db_path = str(db_path)
    if read_only and not Path(db_path).exists():
        raise DatabaseError(f"no database at {db_path}", hint="run `oomlab ingest` first or pass --db")
    creating = not read_only and db_path != ":memory:" and not Path(db_path).exists()
    con = _create(db_path) if creating else _open(db_path, read_only)
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


def _create(db_path: str) -> duckdb.DuckDBPyConnection:
    """A new database, opened: copied from the cached template, or, where that copy does not open as a database
    (a template damaged in the cache: cut short, overwritten), created in place after the damaged template is
    deleted, so that the next new database builds it afresh. The error is never the new file's."""
    template = _copy_template(db_path)
    try:
        return _open(db_path, read_only=False)
    except DatabaseError:
        if template is None:
            raise
    for path in (template, Path(db_path), Path(f"{db_path}.wal")):
        path.unlink(missing_ok=True)
    return _open(db_path, read_only=False)


def _copy_template(db_path: str) -> Path | None:
    """Start a new database as a copy of an empty one with this version's schema, kept in the user's cache.

    Creating the schema's 80-odd tables, macros and views takes DuckDB 0.25-0.28 s; copying the 0.5 MB file it
    makes takes 0.03 s, and every new database (a test, a bench run, a first ingest) starts the same way. The
    template is named for the DuckDB version and the schema's fingerprint, so a change to either makes a new
    one; `apply_schema` checks the copy like any database. Where no cache can be written, the schema is created
    in place as before. Returns the template copied, None where none was.
    """
    template = _template_path()
    if template is None:
        return None
    try:
        if not template.exists():
            _build_template(template)
        with open(template, "rb") as source, open(db_path, "xb") as target:  # "x": never over a file just made
            while chunk := source.read(1 << 20):
                target.write(chunk)
    except FileExistsError:
        return None  # another process created the database meanwhile: open it as it is
    except (OSError, duckdb.Error, DatabaseError):
        Path(db_path).unlink(missing_ok=True)  # a partial copy: create the schema in place (its error, if any)
        return None
    return template


def _template_path() -> Path | None:
    setting = os.environ.get(CACHE_ENV, "").strip()
    if setting.lower() == "off":
        return None
    base = setting or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "oomlab"
    fingerprint = schema_fingerprint().rsplit(" ", 1)[-1]
    return Path(base) / f"schema-duckdb{duckdb.__version__}-{fingerprint}.duckdb"


def _build_template(template: Path) -> None:
    """Write the empty-schema database at `template`: built under a temporary name, moved in place when whole."""
    template.parent.mkdir(parents=True, exist_ok=True)
    partial = template.with_name(f"{template.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    con = _open(str(partial), read_only=False)
    try:
        apply_schema(con)
        con.execute("CHECKPOINT")  # everything in the file itself, no WAL beside it
    finally:
        con.close()
    os.replace(partial, template)


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


def bare_session() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with oomlab's session settings and memory cap but no schema: where oomlab's SQL runs over
    files rather than tables (the aggregate tier over a lake, load/engines.py)."""
    return _open(":memory:", read_only=False)


def _open(db_path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the session settings every stage expects."""
    _refuse_foreign(db_path)
    try:
        con = duckdb.connect(db_path, read_only=read_only)
    except duckdb.Error as exc:  # a lock held, or a file DuckDB cannot read (corrupt, cut short, a newer format)
        if isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower():
            raise DatabaseBusyError(db_path) from exc
        reason = str(exc).splitlines()[0]
        hint = "restore a copy, or ingest the logs again into a new --db" if "corrupt" in reason.lower() else None
        raise DatabaseError(f"cannot open database {db_path}: {reason}", hint=hint) from exc
    _limit_memory(con, db_path)
    con.execute(_SESSION)
    return con


# A DuckDB file carries "DUCK" 8 bytes in (after its header's checksum); what other engines' files start with, to
# say which it is. DuckDB itself would try to read any file given (and its sqlite extension, once loaded, another
# engine's too), so a mistyped --db is refused on these bytes before DuckDB touches it.
_DUCKDB_MAGIC = (8, b"DUCK")
_FOREIGN_MAGIC = {
    b"SQLite format 3\x00": "a SQLite database",
    b"PAR1": "a Parquet file",
    b"ARROW1": "an Arrow file",
    b"\x1f\x8b": "a gzip file",
    b"PK\x03\x04": "a zip file",
}


def _refuse_foreign(db_path: str) -> None:
    """DatabaseError unless the file at `db_path` is missing, empty or a DuckDB database (by its first bytes)."""
    try:
        with open(db_path, "rb") as handle:
            head = handle.read(16)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return  # nothing there (DuckDB creates it) or a name DuckDB reports itself (":memory:", a folder)
    except OSError as exc:
        raise DatabaseError(f"cannot open database {db_path}: {exc.strerror or exc}") from exc
    at, magic = _DUCKDB_MAGIC
    if not head or head[at : at + len(magic)] == magic:
        return
    kind = next((f"{name}, " for start, name in _FOREIGN_MAGIC.items() if head.startswith(start)), "")
    raise DatabaseError(
        f"{db_path} is {kind}not a DuckDB database",
        hint="pass --db the DuckDB file oomlab ingest wrote, or a new path to start one",
    )


MEMORY_LIMIT_ENV = "OOMLAB_MEMORY_LIMIT"


def memory_limit() -> str:
    """DuckDB's buffer pool limit: $OOMLAB_MEMORY_LIMIT (a DuckDB size, e.g. '12GB'), else a quarter of the
    machine's memory. DuckDB's own default, 80 %, counts only its buffers: the same process also holds the
    analyses' polars and Arrow frames, so at 80 % a weekly report over 83M requests was killed by the kernel at
    19.4 GB on a 24 GB machine instead of DuckDB spilling to disk. A quarter leaves the rest room to grow and
    DuckDB spills what does not fit (temp files beside the database)."""
    configured = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if configured:
        return configured
    quarter = quarter_of_memory()
    return "80%" if quarter is None else f"{quarter}B"  # DuckDB's own default where memory cannot be read


def quarter_of_memory() -> int | None:
    """A quarter of the machine's memory in bytes, at least 1 GiB (None where it cannot be read): what one engine
    of oomlab's may hold (DuckDB's buffer pool, a local Spark's heap)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    return max(total // 4, 1 << 30)


def _limit_memory(con: duckdb.DuckDBPyConnection, db_path: str) -> None:
    """SET, not a connect-time config: DuckDB refuses a second in-process connection to a file whose first one
    was opened with another configuration (a caller's own duckdb.connect beside oomlab's)."""
    limit = memory_limit().replace("'", "''")
    try:
        con.execute(f"SET memory_limit = '{limit}'")
    except (duckdb.InvalidInputException, duckdb.ParserException) as exc:  # a size DuckDB does not read
        con.close()
        raise DatabaseError(
            f"cannot open database {db_path}: {MEMORY_LIMIT_ENV}={os.environ.get(MEMORY_LIMIT_ENV)!r}: {exc}",
            hint="give a DuckDB size such as 8GB or 50%",
        ) from exc


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


@dataclass(frozen=True)
class Fetched:
    """What a bounded query returned: its columns, at most `limit` rows, and whether more were left unread."""

    columns: list[str]
    rows: list[tuple[object, ...]]
    truncated: bool


def run_bounded(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: list[object],
    limit: int | None,
    timeout: float | None,
) -> Fetched:
    """Run one statement with a bound on its rows (None: all; rows are fetched as DuckDB streams them, never more
    than the limit plus one) and its time (None: none). It runs in a thread of
    its own, so that Ctrl-C and the timeout interrupt DuckDB (which does not see the signal while it works) and
    the one-line error says which stopped it."""
    outcome: dict[str, object] = {}
    done = threading.Event()

    def work() -> None:
        try:
            cursor = con.execute(sql, params)
            # a statement that returns nothing (a comment alone) leaves no cursor to describe
            columns = [d[0] for d in cursor.description] if cursor is not None and cursor.description else []
            if not columns:
                outcome["fetched"] = Fetched(columns, [], False)
                return
            rows = cursor.fetchall() if limit is None else cursor.fetchmany(limit + 1)
            more = limit is not None and len(rows) > limit
            outcome["fetched"] = Fetched(columns, rows[:limit] if more else rows, more)
        except BaseException as exc:  # handed to the caller's thread, raised there
            outcome["error"] = exc
        finally:
            done.set()

    # Waited for through an event, not Thread.join: a join that Ctrl-C interrupts leaves the thread looking
    # finished while it still runs (CPython's is_alive() then lies), and the connection would be closed under it.
    threading.Thread(target=work, name="oomlab-query", daemon=True).start()
    try:
        finished = done.wait(timeout)
    except KeyboardInterrupt:
        con.interrupt()
        done.wait()
        raise DatabaseError("query stopped: interrupted (Ctrl-C)") from None
    if not finished:
        con.interrupt()
        done.wait()
        raise DatabaseError(f"query stopped after {timeout:g} s", hint="--timeout SECONDS gives it longer")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["fetched"]  # type: ignore[return-value]
