"""SQL files from `sql/`, loaded by name: one object per file, the file name is the object's name."""

from __future__ import annotations

import contextlib
import hashlib
import re
from functools import cache
from pathlib import Path

import duckdb

from ..assets import asset_dir
from ..errors import DatabaseError

# Creation order: every table, macro and view after the objects its SQL names (see `creation_order`).
_FOLDERS = ("tables", "macros", "aggregates", "views")
_VIEW_LAYERS = ("stg_", "fct_", "rpt_")
# Patterns of `creation_order`, compiled there (once per process, and only by one that creates the schema).
_COMMENT = r"--[^\n]*|/\*.*?\*/"
_WORD = r"\w+"
# The objects a file creates: its own name, and each macro of sql/macros/oomlab_settings.sql.
_CREATES = r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:TABLE|VIEW|MACRO|SEQUENCE)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)"


def sql_root() -> Path:
    """The folder holding the SQL files: inside the installed package, or the repo's `sql/` in a checkout."""
    return asset_dir("sql")


@cache
def _index() -> dict[str, Path]:
    """Every SQL file by object name; two files with one name are a packaging error."""
    files: dict[str, Path] = {}
    for path in sorted(sql_root().rglob("*.sql")):
        if path.stem in files:
            raise DatabaseError(f"two SQL files named {path.stem}: {files[path.stem]} and {path}")
        files[path.stem] = path
    return files


def sql_text(name: str) -> str:
    """The text of `sql/**/<name>.sql`."""
    path = _index().get(name)
    if path is None:
        raise DatabaseError(f"no SQL file named {name}.sql under {sql_root()}")
    return path.read_text(encoding="utf-8")


def names_in(folder: str) -> list[str]:
    """Object names in one folder of `sql/`, sorted."""
    return sorted(p.stem for p in (sql_root() / folder).glob("*.sql"))


def _view_order(names: list[str]) -> list[str]:
    """Views ordered stg_, fct_, rpt_, then anything else, each layer alphabetically."""

    def layer(name: str) -> int:
        return next((i for i, p in enumerate(_VIEW_LAYERS) if name.startswith(p)), len(_VIEW_LAYERS))

    return sorted(names, key=lambda n: (layer(n), n))


def bind(sql: str, params: dict[str, object] | None) -> dict[str, object]:
    """The named parameters `sql` uses: DuckDB refuses any it does not."""
    return {k: v for k, v in (params or {}).items() if f"${k}" in sql}


def run_file(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, object] | None = None) -> None:
    """Execute one SQL file; a failure names the file."""
    text = sql_text(name)
    try:
        con.execute(text, bind(text, params))
    except duckdb.Error as exc:
        raise DatabaseError(f"{name}.sql failed: {exc}") from exc


@cache
def creation_order() -> tuple[str, ...]:
    """Every table, macro and view, each after the files defining the objects its SQL names (comments aside):
    tables, macros and views layer by layer where nothing says otherwise. One pass in this order creates
    them all (DuckDB binds a view or a scalar macro when it is created, so what it calls must exist)."""
    comment, creates, word = re.compile(_COMMENT, re.DOTALL), re.compile(_CREATES, re.IGNORECASE), re.compile(_WORD)
    names = names_in("tables") + names_in("macros") + names_in("aggregates") + _view_order(names_in("views"))
    code = {name: comment.sub(" ", sql_text(name)) for name in names}
    file_of = {name: name for name in names}
    file_of |= {obj.lower(): name for name in names for obj in creates.findall(code[name])}
    uses = {
        name: sorted({file_of[w] for w in {w.lower() for w in word.findall(code[name])} if w in file_of} - {name})
        for name in names
    }
    order: list[str] = []

    def place(name: str, path: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in path:
            raise DatabaseError(f"SQL objects name each other in a circle: {' -> '.join((*path, name))}")
        for used in uses[name]:
            place(used, (*path, name))
        order.append(name)

    for name in names:
        place(name, ())
    return tuple(order)


# The schema's version: raised whenever a table gains, loses or changes a column, so that an oomlab older than a
# database refuses it (its views would name columns the tables no longer hold, and its schema update would
# replace the newer views) instead of rewriting it. Databases from before versions read as 1.
SCHEMA_VERSION = 2
# Tables every oomlab database has held since the first release: one of them missing was renamed or dropped by
# hand, and creating it empty would silently lose its rows, so opening such a database is an error instead.
FOUNDATION_TABLES = ("sources", "requests", "oom_events", "rejects")


@cache
def schema_fingerprint() -> str:
    """A hash of every table, macro and view definition, after the schema's version: tells whether a database's
    schema is current (`oomlab schema v2 1a2b...`)."""
    digest = hashlib.sha256()
    for folder in _FOLDERS:
        for path in sorted((sql_root() / folder).glob("*.sql")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"oomlab schema v{SCHEMA_VERSION} " + digest.hexdigest()[:16]


def stored_version(fingerprint: str | None) -> int:
    """The schema version a stored fingerprint names (1 for the unversioned ones of earlier releases)."""
    match = re.match(r"oomlab schema v(\d+) ", fingerprint or "")
    return int(match.group(1)) if match else 1


# The comment of `sources`, which holds the schema's fingerprint: no row when the database has no `sources`.
_SOURCES_COMMENT = (
    "SELECT comment FROM duckdb_tables() WHERE table_name = 'sources' "
    "AND schema_name = 'main' AND database_name = current_database()"
)


def schema_outdated(con: duckdb.DuckDBPyConnection) -> bool:
    """True for an oomlab database (it has `sources`) whose schema is not this version's: one created by an
    earlier version, whose views and macros name other objects, or none of this version's new ones. One
    catalog query: `sources` and its comment (the fingerprint) come in the same row."""
    rows = con.execute(_SOURCES_COMMENT).fetchall()
    return bool(rows) and rows[0][0] != schema_fingerprint()


# Columns an earlier version named otherwise, renamed in place (the only renames docs/schema.md allows), with the
# hash algorithm their digests are in: sources.sha256 (the first releases, sha256) and sources.fingerprint (from
# commit 7cce5a5, xxh3-128) both became content_hash, `hash_algorithm` saying which (parse/facts.HASH_ALGORITHM).
_RENAMED = (("sources", "sha256", "content_hash", "sha256"), ("sources", "fingerprint", "content_hash", "xxh3-128"))


def _rename_columns(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Rename the columns of _RENAMED an earlier version's tables hold; the hash algorithms of the digests moved."""
    algorithms = []
    for table, old, new, algorithm in _RENAMED:
        found = con.execute(
            "SELECT count(*) FROM duckdb_columns() WHERE table_name = $table AND column_name = $old "
            "AND schema_name = 'main' AND database_name = current_database()",
            {"table": table, "old": old},
        ).fetchall()[0][0]
        if found:
            con.execute(f'ALTER TABLE "{table}" RENAME COLUMN "{old}" TO "{new}"')  # names: this module's constants
            algorithms.append(algorithm)
    return algorithms


def apply_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every table, macro and view that does not exist yet, unless the database already has this
    version's schema (its fingerprint is kept as the comment of `sources`): a connection then costs
    nothing extra instead of re-creating dozens of views."""
    fingerprint = schema_fingerprint()
    rows = con.execute(_SOURCES_COMMENT).fetchall()  # a row when the database has `sources`: oomlab wrote it
    stored = rows[0][0] if rows else None
    if stored == fingerprint:
        return
    refuse_newer(stored)
    con.execute("BEGIN TRANSACTION")  # one commit for all: half the time of one per object
    try:
        renamed = _rename_columns(con)
        if _has_tables(con):  # an earlier version's database: its tables brought to this version's columns
            _migrate_tables(con)
        for algorithm in renamed:  # the digests kept under their new name are in their release's algorithm
            con.execute("UPDATE sources SET hash_algorithm = $a WHERE hash_algorithm IS NULL", {"a": algorithm})
        for name in creation_order():
            run_file(con, name)
        con.execute(f"COMMENT ON TABLE sources IS '{fingerprint}'")  # hex digits only: nothing to escape
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        raise


def rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back the open transaction, for an error path: when the rollback fails too (the database was
    invalidated by a full disk, the transaction already aborted), the error that got here is the one to report,
    so the rollback's own error is dropped rather than raised over it."""
    with contextlib.suppress(duckdb.Error):
        con.execute("ROLLBACK")


def refuse_newer(stored: str | None) -> None:
    """A DatabaseError when the database was written by a newer oomlab than this one."""
    version = stored_version(stored)
    if version > SCHEMA_VERSION:
        raise DatabaseError(
            f"the database was written by a newer oomlab (schema v{version}); this one reads schema "
            f"v{SCHEMA_VERSION} and would rewrite it",
            hint="upgrade oomlab (pip install -U oomlab), or ingest into a new database",
        )


def _migrate_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Bring an earlier version's tables to this version's columns: a missing column is added (NULL in the rows
    already there, which the views read as unknown); a foundation table that is missing, or a column whose type
    changed, is an error that names it, never a table recreated empty or a value cast behind the user's back."""
    expected = _expected_columns()
    present = _columns(con)
    missing = [t for t in FOUNDATION_TABLES if t not in present]
    if len(missing) == len(FOUNDATION_TABLES):
        return  # none of oomlab's tables yet (a DuckDB file with tables of its own): the schema is created beside
    if missing:
        raise DatabaseError(
            f"the database has no table {', '.join(missing)}: renamed or dropped outside oomlab",
            hint="restore it from a copy, or ingest into a new database; oomlab never recreates it empty",
        )
    for table, columns in expected.items():
        have = present.get(table)
        if have is None:
            continue  # new in this version: created with the others
        for column, kind in columns.items():
            if column not in have:
                default = _expected_defaults().get((table, column))
                added = f"{kind} DEFAULT {default}" if default is not None else kind  # as sql/tables declare it
                con.execute(f'ALTER TABLE "{table}" ADD COLUMN "{column}" {added}')
            elif have[column] != kind:
                raise DatabaseError(
                    f"{table}.{column} is {have[column]} in the database; this oomlab stores {kind} there",
                    hint="ingest into a new database (the column's values cannot be converted safely)",
                )


def _has_tables(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the database holds any table already (an earlier version's, or one renamed by hand)."""
    return bool(_columns(con))


def _columns(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    """Each base table of the database's main schema with its columns' types."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE schema_name = 'main' AND database_name = current_database() "
        "AND table_name IN (SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
        "AND database_name = current_database())"
    ).fetchall()
    out: dict[str, dict[str, str]] = {}
    for table, column, kind in rows:
        out.setdefault(table, {})[column] = kind
    return out


@cache
def _expected_columns() -> dict[str, dict[str, str]]:
    """This version's tables and columns, from its sql/tables run in a scratch database."""
    return _scratch_schema()[0]


def _expected_defaults() -> dict[tuple[str, str], str]:
    """The DEFAULT expression of each of this version's columns that declares one."""
    return _scratch_schema()[1]


@cache
def _scratch_schema() -> tuple[dict[str, dict[str, str]], dict[tuple[str, str], str]]:
    scratch = duckdb.connect()
    try:
        for name in names_in("tables"):
            run_file(scratch, name)
        defaults = scratch.execute(
            "SELECT table_name, column_name, column_default FROM duckdb_columns() "
            "WHERE schema_name = 'main' AND column_default IS NOT NULL"
        ).fetchall()
        return _columns(scratch), {(t, c): d for t, c, d in defaults}
    finally:
        scratch.close()
