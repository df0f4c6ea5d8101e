"""SQL files from `sql/`, loaded by name: one object per file, the file name is the object's name."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import duckdb

from .assets import asset_dir
from .errors import DatabaseError

# Creation order: tables, then macros and views together (scalar macros serve views, a table macro may read
# views), macros first, then views layer by layer; what fails for a missing dependency is retried.
_FOLDERS = ("tables", "macros", "views")
_VIEW_LAYERS = ("stg_", "fct_", "rpt_")


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


def _create_in_dependency_order(con: duckdb.DuckDBPyConnection, names: list[str]) -> None:
    """Create objects that may use each other: retry the failures while each pass makes progress."""
    pending = names
    while pending:
        failed: list[str] = []
        for name in pending:
            try:
                run_file(con, name)
            except DatabaseError:
                failed.append(name)
        if len(failed) == len(pending):
            run_file(con, failed[0])  # raises with the first real error
        pending = failed


@cache
def schema_fingerprint() -> str:
    """A hash of every table, macro and view definition: tells whether a database's schema is current."""
    digest = hashlib.sha256()
    for folder in _FOLDERS:
        for path in sorted((sql_root() / folder).glob("*.sql")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return "oomlab schema " + digest.hexdigest()[:16]


def _stored_fingerprint(con: duckdb.DuckDBPyConnection) -> str | None:
    rows = con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'sources' "
                       "AND schema_name = 'main' AND database_name = current_database()").fetchall()
    return rows[0][0] if rows else None


def apply_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every table, macro and view that does not exist yet, unless the database already has this
    version's schema (its fingerprint is kept as the comment of `sources`): a connection then costs
    nothing extra instead of re-creating dozens of views."""
    fingerprint = schema_fingerprint()
    if _stored_fingerprint(con) == fingerprint:
        return
    _create_in_dependency_order(con, names_in("tables"))
    _create_in_dependency_order(con, names_in("macros") + _view_order(names_in("views")))
    con.execute(f"COMMENT ON TABLE sources IS '{fingerprint}'")  # hex digits only: nothing to escape
