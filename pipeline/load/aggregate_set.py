"""An aggregate set (`oomlab aggregate --out AGG`) opened as a database: an in-memory DuckDB with oomlab's schema,
the set's copies of the small tables loaded into their tables, and every `agg_` view replaced by a view of the set's
Parquet files, so that the fct_ views, queries, analyses and findings run on it exactly as on a database (they read
the aggregate tier, never raw requests; the `requests` table stays empty here)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from ..errors import OomlabError
from ..parse.structured import quote_ident
from .aggregate import MANIFEST, RAW_TABLES, set_folder
from .connection import bare_session
from .lake import LAKE_TABLES, path_literal
from .reconcile import reconcile_oom_sightings
from .sql import apply_schema, names_in


def open_aggregate_set(agg: Path) -> duckdb.DuckDBPyConnection:
    """A connection on the aggregate set at `agg`; a folder that is no set is one line."""
    agg = set_folder(agg, _manifest(agg))
    con = bare_session()
    try:
        apply_schema(con)
        for table in LAKE_TABLES:
            if table not in RAW_TABLES:
                _load_table(con, table, agg / table)
        for name in names_in("aggregates"):
            _attach_aggregate(con, name, agg / name)
        reconcile_oom_sightings(con)  # the lake keeps every sighting; one event per real OOM, as in a database
    except BaseException:
        con.close()
        raise
    return con


def _manifest(agg: Path) -> dict[str, object]:
    try:
        manifest = json.loads((agg / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OomlabError(
            f"no aggregate set at {agg}: {agg / MANIFEST} is missing", hint="oomlab aggregate --lake DIR --out AGG"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OomlabError(f"aggregate set {agg}: {MANIFEST} is unreadable: {exc}") from None
    if not isinstance(manifest, dict):
        raise OomlabError(f"aggregate set {agg}: {MANIFEST} is not a JSON object")
    return manifest


def _columns(con: duckdb.DuckDBPyConnection, relation: str) -> dict[str, str]:
    rows = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
        [relation],
    ).fetchall()
    return dict(rows)


def _source(con: duckdb.DuckDBPyConnection, folder: Path, columns: dict[str, str]) -> str:
    """The set's files of one table or aggregate, read as the schema types them (the writing engine's types may
    differ: Spark writes DuckDB's HUGEINT sums as DECIMAL); a folder without files is an empty relation, and a
    column the files lack (a set an earlier version wrote) reads as NULL."""
    if not folder.is_dir():
        raise OomlabError(f"aggregate set incomplete: {folder} is missing", hint="run oomlab aggregate again")
    if not any(folder.glob("*.parquet")):
        nulls = ", ".join(f'CAST(NULL AS {t}) AS "{c}"' for c, t in columns.items())
        return f"SELECT {nulls} WHERE false"
    files = f"read_parquet({path_literal(folder / '*.parquet')}, union_by_name = true)"
    present = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {files}").fetchall()}
    typed = ", ".join(f'CAST({quote_ident(c) if c in present else "NULL"} AS {t}) AS "{c}"' for c, t in columns.items())
    return f"SELECT {typed} FROM {files}"


def _load_table(con: duckdb.DuckDBPyConnection, table: str, folder: Path) -> None:
    con.execute(f'INSERT INTO "{table}" {_source(con, folder, _columns(con, table))}')


def _attach_aggregate(con: duckdb.DuckDBPyConnection, name: str, folder: Path) -> None:
    con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {_source(con, folder, _columns(con, name))}')
