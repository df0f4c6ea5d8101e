"""docs/schema.md is the schema's contract: every table and column of a live database is documented."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from oomlab.load.tables import connect

from conftest import ROOT

DOC = ROOT / "docs" / "schema.md"


def documented() -> dict[str, dict[str, str]]:
    """Tables of the document: `## name` headings followed by `| column | type | meaning |` rows."""
    tables: dict[str, dict[str, str]] = {}
    current = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):  # a table's section, or prose (views, JSON) that ends the last table
            heading = re.match(r"^## (\w+)$", line)
            current = tables.setdefault(heading.group(1), {}) if heading else None
            continue
        row = re.match(r"^\| (\w+) \| ([^|]+?) \| [^|]+ \|$", line)
        if current is not None and row and row.group(1) != "column":
            current[row.group(1)] = row.group(2)
    return tables


def live(db: Path) -> dict[str, dict[str, str]]:
    con = connect(db)
    try:
        rows = con.execute(
            "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables t USING (table_schema, table_name) "
            "WHERE t.table_type = 'BASE TABLE' AND c.table_schema = 'main' ORDER BY c.ordinal_position"
        ).fetchall()
    finally:
        con.close()
    tables: dict[str, dict[str, str]] = {}
    for table, column, kind in rows:
        tables.setdefault(table, {})[column] = kind
    return tables


def test_every_table_and_column_is_documented_with_its_type(db):
    doc, db_tables = documented(), live(db)
    assert sorted(doc) == sorted(db_tables)
    for table, columns in db_tables.items():
        assert list(doc[table]) == list(columns), table
        for column, kind in columns.items():
            assert duckdb.sqltype(doc[table][column]) == duckdb.sqltype(kind), f"{table}.{column}"


def test_every_view_is_documented():
    text = DOC.read_text(encoding="utf-8")
    views = sorted(p.stem for p in (ROOT / "sql" / "views").glob("*.sql"))
    assert views and [v for v in views if f"`{v}`" not in text] == []


def test_an_outdated_schema_is_brought_up_to_date_and_a_current_one_left_alone(db):
    con = connect(db)
    con.execute("DROP VIEW rpt_sources")
    con.close()
    con = connect(db)  # fingerprint unchanged: the schema is trusted as it is
    assert con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'rpt_sources'").fetchall() == [(0,)]
    con.execute("COMMENT ON TABLE sources IS 'oomlab schema of an older version'")
    con.close()
    con = connect(db)
    try:
        assert con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'rpt_sources'").fetchall() == [(1,)]
    finally:
        con.close()
