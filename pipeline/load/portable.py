"""oomlab's SQL, written in DuckDB's dialect, for another engine (Spark): its macros expanded in place, then
transpiled by sqlglot. There is one copy of every statement; this module only rewrites it.

DuckDB macros have no counterpart in Spark SQL, so a call `oomlab_is_oom(status, error)` or `TS_EARLIEST()` is
replaced by the macro's body with its parameters bound to the call's arguments (sql/macros/, parsed once).
Views become temporary views: a Spark session without a metastore keeps them, and they may read other temporary
views (the lake's tables)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import sqlglot
from sqlglot import exp

from ..errors import DatabaseError
from .sql import names_in, sql_text

# A macro calling a macro calling ...: oomlab's nest two deep; more than this is a loop in sql/macros/.
_MAX_EXPANSIONS = 16


@dataclass(frozen=True)
class Macro:
    params: tuple[str, ...]
    body: exp.Expression


@cache
def scalar_macros() -> dict[str, Macro]:
    """Every scalar macro of sql/macros/ by lowercase name (table macros are not portable and not used by the
    SQL that runs on other engines)."""
    found: dict[str, Macro] = {}
    for name in names_in("macros"):
        for statement in sqlglot.parse(sql_text(name), read="duckdb"):
            if isinstance(statement, exp.Create) and str(statement.args.get("kind")).upper() == "MACRO":
                udf = statement.this
                body = statement.expression
                if isinstance(body, exp.Query):
                    continue  # a table macro
                params = tuple(p.name.lower() for p in udf.expressions)
                found[udf.this.name.lower()] = Macro(params, body)
    return found


def expand_macros(expression: exp.Expression) -> exp.Expression:
    """`expression` with every call of an oomlab macro replaced by its body, arguments in place of parameters."""
    macros = scalar_macros()
    for _ in range(_MAX_EXPANSIONS):
        calls = [c for c in expression.find_all(exp.Anonymous) if c.name.lower() in macros]
        if not calls:
            return expression
        for call in calls:
            call.replace(_bound(macros[call.name.lower()], call.expressions))
    raise DatabaseError(f"macros nested more than {_MAX_EXPANSIONS} deep in: {expression.sql()[:80]}")


def _bound(macro: Macro, args: list[exp.Expression]) -> exp.Expression:
    if len(args) != len(macro.params):
        raise DatabaseError(f"macro called with {len(args)} arguments, defined with {len(macro.params)}")
    values = dict(zip(macro.params, args, strict=True))
    body = macro.body.copy()
    # the parameters are found before any is replaced, so an argument that names a column called like another
    # parameter is never substituted again
    uses = [c for c in body.find_all(exp.Column) if not c.table and c.name.lower() in values]
    for column in uses:
        column.replace(exp.paren(values[column.name.lower()].copy(), copy=False))
    return exp.paren(body, copy=False) if not isinstance(body, exp.Column) else body


def for_engine(sql: str, dialect: str) -> list[str]:
    """The statements of `sql` (DuckDB's dialect) for `dialect` ('duckdb' or 'spark'): macros expanded, views
    temporary, transpiled."""
    statements = []
    for statement in sqlglot.parse(sql, read="duckdb"):
        if statement is None:
            continue
        if isinstance(statement, exp.Create) and str(statement.args.get("kind")).upper() == "VIEW":
            statement.set("properties", exp.Properties(expressions=[exp.TemporaryProperty()]))
        statement = expand_macros(statement)
        if dialect == "spark":
            statement = _spark_hints(statement.transform(_spark_percentile))
        statements.append(statement.sql(dialect=dialect, comments=False))
    return statements


# The one hint oomlab's SQL gives: BROADCAST of relations the statement names (sqlglot would pass anything on, and
# Spark ignores a hint it cannot read without a word).
_BROADCAST = re.compile(r"^\+\s*BROADCAST\(\s*\w+(\s*,\s*\w+)*\s*\)\s*$", re.IGNORECASE)


def _spark_hints(statement: exp.Expression) -> exp.Expression:
    """A SELECT's `/*+ BROADCAST(b) */` comment as Spark's join hint. DuckDB reads it as the comment it is (its
    planner sizes the join sides itself); Spark cannot size an aggregate before running it, so without the hint it
    shuffles and sorts every request to join them to a few dozen rows."""
    for select in statement.find_all(exp.Select):
        hints = [c for c in select.comments or [] if c.lstrip().startswith("+")]
        if hints:
            if not _BROADCAST.match(hints[0].strip()):
                raise DatabaseError(f"not a Spark hint oomlab gives: /*{hints[0]}*/ (BROADCAST(name, ...))")
            select.set("hint", sqlglot.parse_one(f"SELECT /*{hints[0]}*/ 1", read="spark").args["hint"])
    return statement


def _spark_percentile(node: exp.Expression) -> exp.Expression:
    """DuckDB's quantile_cont(x, q) is Spark's percentile(x, q): both interpolate linearly between the values at
    ranks floor and ceil of q x (n - 1), exactly. sqlglot writes percentile_cont(x, q), which Spark only knows as
    the WITHIN GROUP form."""
    if isinstance(node, exp.PercentileCont) and node.expression is not None:
        return exp.Anonymous(this="percentile", expressions=[node.this.copy(), node.expression.copy()])
    return node


def spark_type(duckdb_type: str) -> str:
    """A column type as DuckDB's catalog names it (`BIGINT`, `TIMESTAMP`, `STRUCT(pid BIGINT, ...)[]`), in Spark's
    words: TIMESTAMP is timestamp_ntz (oomlab's times are naive UTC), JSON is text."""
    if duckdb_type.upper() == "JSON":
        return "string"
    return exp.DataType.build(duckdb_type, dialect="duckdb").sql(dialect="spark")
