"""sql/: the objects are created in one pass, each after the objects it names; a schema is applied whole."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from oomlab.errors import DatabaseError
from oomlab.load import sql
from oomlab.load.tables import connect


def test_each_object_comes_after_those_its_sql_names() -> None:
    order = sql.creation_order()
    folders = ("tables", "macros", "aggregates", "views")
    assert len(order) == len(set(order)) == sum(len(sql.names_in(folder)) for folder in folders)
    position = {name: i for i, name in enumerate(order)}
    for name in order:
        code = re.sub(r"--[^\n]*", " ", sql.sql_text(name))
        for other in set(re.findall(r"\w+", code)) & set(order) - {name}:
            assert position[other] < position[name], f"{name} uses {other}"
    assert position["oomlab_unit_bytes"] < position["oomlab_bytes"]  # a macro that uses another
    assert max(position[t] for t in sql.names_in("tables")) < min(position[m] for m in sql.names_in("macros"))


def test_objects_naming_each_other_in_a_circle_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = {
        "a_view": "CREATE VIEW a_view AS SELECT * FROM b_view",
        "b_view": "CREATE VIEW b_view AS SELECT * FROM a_view",
    }
    monkeypatch.setattr(sql, "names_in", lambda folder: sorted(texts) if folder == "views" else [])
    monkeypatch.setattr(sql, "sql_text", texts.__getitem__)
    sql.creation_order.cache_clear()
    try:
        with pytest.raises(DatabaseError, match="a_view -> b_view -> a_view"):
            sql.creation_order()
    finally:
        sql.creation_order.cache_clear()


def test_a_failing_object_leaves_no_schema_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OOMLAB_CACHE_DIR", "off")  # the schema is created in place, not copied from a template
    broken = sql.creation_order()[-1]
    real = sql.sql_text
    monkeypatch.setattr(sql, "sql_text", lambda name: "SELEC nonsense" if name == broken else real(name))
    with pytest.raises(DatabaseError, match=f"{broken}.sql failed"):
        connect(tmp_path / "db.duckdb")
    with duckdb.connect(str(tmp_path / "db.duckdb")) as con:
        assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchall() == [(0,)]
    monkeypatch.undo()
    with connect(tmp_path / "db.duckdb") as con:  # a later connection creates it all
        assert con.execute("SELECT count(*) FROM rpt_sources").fetchall() == [(0,)]
