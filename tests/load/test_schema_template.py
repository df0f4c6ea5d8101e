"""New databases start as copies of an empty-schema template in the cache (load/connection.py): the copy must be
exactly what creating the schema in place gives, and the template must never stand in for another schema."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from oomlab.load import connection
from oomlab.load.connection import connect

_CATALOG = (
    "SELECT 'column', table_name || '.' || column_name || ' ' || data_type FROM duckdb_columns() "
    "WHERE schema_name = 'main' UNION ALL SELECT 'view', view_name FROM duckdb_views() WHERE NOT internal "
    "UNION ALL SELECT 'macro', function_name FROM duckdb_functions() WHERE function_type = 'macro' AND NOT internal "
    "UNION ALL SELECT 'comment', comment FROM duckdb_tables() WHERE table_name = 'sources' ORDER BY 1, 2"
)


def _catalog(path: Path) -> list[tuple[str, str]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(_CATALOG).fetchall()


def test_a_copied_database_has_the_schema_created_in_place(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OOMLAB_CACHE_DIR", str(tmp_path / "cache"))
    connect(tmp_path / "first.duckdb").close()  # builds the template, then copies it
    template = connection._template_path()
    assert template is not None and template.is_file()
    connect(tmp_path / "copied.duckdb").close()
    monkeypatch.setenv("OOMLAB_CACHE_DIR", "off")
    connect(tmp_path / "in_place.duckdb").close()
    in_place = _catalog(tmp_path / "in_place.duckdb")
    assert len(in_place) > 100
    assert _catalog(tmp_path / "copied.duckdb") == in_place
    assert _catalog(tmp_path / "first.duckdb") == in_place


def test_the_template_is_named_for_the_schema_and_duckdb(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OOMLAB_CACHE_DIR", str(tmp_path))
    template = connection._template_path()
    assert template is not None
    assert template.name.startswith(f"schema-duckdb{duckdb.__version__}-")
    monkeypatch.setattr(connection, "schema_fingerprint", lambda: "oomlab schema 0123456789abcdef")
    assert connection._template_path() != template  # another schema: another template


def test_an_existing_database_is_never_overwritten(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OOMLAB_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "mine.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE mine AS SELECT 42 AS answer")
    with connect(path) as con:
        assert con.execute("SELECT answer FROM mine").fetchall() == [(42,)]


@pytest.mark.parametrize("setting", ["off", "/proc/no-such-place"])
def test_without_a_usable_cache_the_schema_is_created_in_place(tmp_path, monkeypatch, setting) -> None:
    monkeypatch.setenv("OOMLAB_CACHE_DIR", setting)
    with connect(tmp_path / "db.duckdb") as con:
        assert con.execute("SELECT count(*) FROM rpt_sources").fetchall() == [(0,)]
