"""sql/ is layered as dbt's jaffle_shop: only `stg_` views name the tables of sql/tables/ (the statements of
sql/ingest/ write them and may too); `fct_` views build on `stg_` and each other, `rpt_` views on both,
queries and macros on any view. Every SQL file oomlab loads by name exists, and every query is run.

Table references are found by parsing each file with sqlglot's DuckDB dialect, so that a name in a comment,
a string, a column or a CTE is not taken for a table. Every file of sql/ parses (a statement sqlglot could
only keep as an opaque Command fails the test), so no tokenizer of our own is needed."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from conftest import ROOT

SQL = ROOT / "sql"
PACKAGE = ROOT / "pipeline"
FILES = sorted(SQL.rglob("*.sql"))
TABLES = {p.stem for p in (SQL / "tables").glob("*.sql")}
# The objects of sql/tables/: its tables and the sequences their ids are drawn from.
TABLE_OBJECTS = TABLES | {
    name.lower()
    for p in (SQL / "tables").glob("*.sql")
    for name in re.findall(r"CREATE SEQUENCE IF NOT EXISTS (\w+)", p.read_text(encoding="utf-8"))
}
AGGREGATES = {p.stem for p in (SQL / "aggregates").glob("*.sql")}
VIEWS = {p.stem for p in (SQL / "views").glob("*.sql")} | AGGREGATES
MACROS = {p.stem for p in (SQL / "macros").glob("*.sql")}
# Layers and what each may read besides macros; a query or a macro may read any view.
MAY_READ = {
    "stg_": TABLES | {v for v in VIEWS if v.startswith("stg_")},
    "agg_": {v for v in VIEWS if v.startswith("stg_")},
    "fct_": {v for v in VIEWS if v.startswith(("stg_", "agg_", "fct_"))},
    "rpt_": {v for v in VIEWS if v.startswith(("stg_", "agg_", "fct_", "rpt_"))},
    "q_": VIEWS,
    "oomlab_": VIEWS,
}
# Stages that write the tables, or stage files as relations before anything is loaded: their inline SQL
# may name tables. Every other module reads the `stg_` views like the SQL files do.
WRITERS = ("load", "ingest", "parse", "capture")


def _relid(path: Path) -> str:
    return str(path.relative_to(ROOT))


@cache
def objects_read(sql: str) -> frozenset[str]:
    """Every table, view or table macro a SQL text reads (lowercase): CTE names and what it creates aside."""
    names: set[str] = set()
    for statement in sqlglot.parse(sql, read="duckdb"):
        if statement is None:
            continue
        # sqlglot falls back to an opaque Command for syntax it does not know: that would hide every name
        assert not isinstance(statement, exp.Command), f"sqlglot cannot parse: {statement.sql()[:80]}"
        created = statement.this if isinstance(statement, exp.Create) else None
        if isinstance(created, exp.UserDefinedFunction):  # a macro: its name is the function's
            created = created.this
        ctes = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
        for table in statement.find_all(exp.Table):
            if table is created:
                continue
            name = table.this.name if isinstance(table.this, exp.Func) else table.name
            if name and name.lower() not in ctes:
                names.add(name.lower())
        for call in statement.find_all(exp.Anonymous):  # a sequence is named in a string: nextval('ids')
            if call.name.lower() in ("nextval", "currval") and isinstance(call.expressions[0], exp.Literal):
                names.add(call.expressions[0].this.lower())
    return frozenset(names)


def _layer(name: str) -> str | None:
    return next((prefix for prefix in MAY_READ if name.startswith(prefix)), None)


@pytest.mark.parametrize(
    "path", [p for p in FILES if p.parent.name in ("views", "aggregates", "macros", "queries")], ids=_relid
)
def test_each_view_query_and_macro_reads_only_the_layers_below(path: Path) -> None:
    layer = _layer(path.stem)
    assert layer is not None, f"{path.stem}: not a stg_, fct_, rpt_, q_ or oomlab_ name"
    read = objects_read(path.read_text(encoding="utf-8")) - MACROS
    assert read <= TABLES | VIEWS, f"{path.stem} reads objects sql/ does not define: {sorted(read - TABLES - VIEWS)}"
    assert read <= MAY_READ[layer], f"{path.stem} ({layer}) reads {sorted(read - MAY_READ[layer])}"


# The views and queries that still read every request rather than the aggregate tier (sql/aggregates/), which
# `oomlab aggregate` computes from a lake on DuckDB or Spark. Issue 16 moves each onto an aggregate; this list only
# shrinks, and a new reader of raw requests fails here.
RAW_REQUEST_READERS = {
    "fct_prompt_requests",  # per-request prompt sizes for `oomlab query` and inspection: no analysis reads it (below)
    "fct_water_requests",  # per-request levels for `oomlab query`: no analysis reads it (below)
}
# The staged views of one row per request (stg_prompt_requests: stg_requests with its sizes weighed;
# stg_incident_requests: as the incident timeline draws it).
PER_REQUEST = {"stg_requests", "stg_prompt_requests", "stg_incident_requests"}


def test_no_analysis_reads_the_per_request_views() -> None:
    readers = {p.stem for p in FILES if "fct_water_requests" in objects_read(p.read_text(encoding="utf-8"))}
    code = [p for p in _python_modules() if "fct_water_requests" in p.read_text(encoding="utf-8")]
    assert readers == set() and code == []
    # q_prompt_rows is what prompt_threshold.prompt_requests returns, and only tests call that
    readers = {p.stem for p in FILES if "fct_prompt_requests" in objects_read(p.read_text(encoding="utf-8"))}
    calls = [p for p in _python_modules() if re.search(r"\bprompt_requests\(", p.read_text(encoding="utf-8"))]
    assert readers == {"q_prompt_rows"} and [str(p.relative_to(PACKAGE)) for p in calls] == [
        "analyses/fleet/prompt_threshold.py"
    ]
    assert "def prompt_requests(" in calls[0].read_text(encoding="utf-8")


def test_only_the_aggregate_tier_reads_every_request() -> None:
    readers = {p.stem for p in FILES if objects_read(p.read_text(encoding="utf-8")) & PER_REQUEST}
    assert readers - AGGREGATES - PER_REQUEST == RAW_REQUEST_READERS


def test_only_stg_views_and_ingest_statements_name_tables() -> None:
    readers = {p.stem: objects_read(p.read_text(encoding="utf-8")) & TABLE_OBJECTS for p in FILES}
    allowed = {p.stem for p in FILES if p.parent.name in ("tables", "ingest") or p.stem.startswith("stg_")}
    assert {name: sorted(t) for name, t in readers.items() if t and name not in allowed} == {}


def test_each_stg_view_named_after_a_table_reads_it() -> None:
    staged = {t for p in FILES if p.stem.startswith("stg_") for t in objects_read(p.read_text(encoding="utf-8"))}
    thin = {t for t in TABLES if f"stg_{t}" in VIEWS}
    assert thin <= staged
    assert {"oom_events", "requests", "segments", "trace_events", "snapshots", "sources"} <= thin


def _python_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _inline_sql(path: Path) -> list[str]:
    """The string constants of a module that are SELECT statements (adjacent literals joined), written as the
    package writes SQL: the keyword in capitals (prose that begins "With ..." is not SQL)."""
    return [
        node.value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.lstrip().startswith(("SELECT ", "WITH "))
    ]


@pytest.mark.parametrize(
    "path",
    [p for p in _python_modules() if p.relative_to(PACKAGE).parts[0] not in WRITERS],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_inline_sql_of_later_stages_reads_views_not_tables(path: Path) -> None:
    tables = {sql[:60]: sorted(objects_read(sql) & TABLE_OBJECTS) for sql in _inline_sql(path)}
    assert {sql: t for sql, t in tables.items() if t} == {}


def _named_sql_files() -> dict[str, set[str]]:
    """SQL file names the package loads by name (`sql_text("x")`, `run_file(con, "x")`, `fetch_dicts(con,
    "x", ...)`), each with the modules that do."""
    loaders = {"sql_text": 0, "run_file": 1, "fetch_dicts": 1}
    found: dict[str, set[str]] = {}
    for path in _python_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            position = loaders.get(func or "")
            if position is not None and len(node.args) > position:
                arg = node.args[position]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.setdefault(arg.value, set()).add(str(path.relative_to(PACKAGE)))
    return found


def test_every_sql_file_loaded_by_name_exists() -> None:
    named = _named_sql_files()
    assert len(named) > 40  # the scan finds the loaders' calls
    stems = {p.stem for p in FILES}
    assert {name: sorted(where) for name, where in named.items() if name not in stems} == {}


def test_every_query_is_run_by_some_module() -> None:
    constants = {
        node.value
        for path in _python_modules()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    queries = sorted(p.stem for p in (SQL / "queries").glob("q_*.sql"))
    assert queries and [q for q in queries if q not in constants] == []
    assert set(queries) <= set(_named_sql_files())  # and loaded through the SQL loader, not read otherwise


def _used_by(query: str) -> set[str]:
    """The modules a query's header comment says run it (`Used by oomlab.x and oomlab.y.`)."""
    text = (SQL / "queries" / f"{query}.sql").read_text(encoding="utf-8")
    return set(re.findall(r"oomlab(?:\.\w+)+", text.split("Used by ", 1)[-1].split(".\n")[0]))


def test_each_query_names_the_modules_that_run_it() -> None:
    runners = {
        q: {"oomlab." + m.removesuffix(".py").replace("/", ".") for m in where}
        for q, where in _named_sql_files().items()
        if q.startswith("q_")
    }
    assert {q: sorted(_used_by(q)) for q in runners if _used_by(q) != runners[q]} == {}


def test_the_parser_sees_through_ctes_comments_and_table_macros() -> None:
    sql = """-- FROM oom_events in a comment
    WITH oom_events AS (SELECT * FROM stg_oom_events)
    SELECT 'FROM requests' AS s FROM oom_events JOIN oomlab_water_hourly(NULL, NULL) USING (instance)"""
    assert objects_read(sql) == {"stg_oom_events", "oomlab_water_hourly"}
    assert objects_read("CREATE OR REPLACE VIEW stg_x AS SELECT * FROM segments") == {"segments"}
    assert objects_read("SELECT nextval('source_ids')") == {"source_ids"} <= TABLE_OBJECTS
