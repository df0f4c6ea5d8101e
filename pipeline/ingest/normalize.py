"""Normalize a staged request log into typed canonical columns, each bad row with its reason.

The conversions are SQL macros (`sql/macros/`); this module only picks, per canonical field, the
source column and the macro that suits the column's DuckDB type, and writes the checks that turn a
value that would not convert into a reject reason instead of a silent NULL, and the check that sets aside a
row whose values no device can have (`oomlab_request_possible`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..fields import FIELDS, Field, resolve_columns
from ..load.sql import bind
from ..parse.structured import Stage

_NUMERIC = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL",
)
_INTEGER = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")
_NUMERIC_CASTS = {"bytes": "CAST(round({0}) AS BIGINT)", "float": "CAST({0} AS DOUBLE)", "int": "oomlab_int({0})"}
_WHAT = {"ts": "a timestamp", "int": "an integer", "float": "a number", "bytes": "a byte size", "text": "text"}


def _is_numeric(duck_type: str) -> bool:
    return duck_type.startswith(_NUMERIC)


def _is_integer(duck_type: str) -> bool:
    return duck_type.startswith(_INTEGER)


def convert_sql(kind: str, source: str, duck_type: str) -> str:
    """SQL converting `source` (of DuckDB type `duck_type`) to the canonical kind."""
    if kind == "ts":
        return _ts_sql(source, duck_type)
    if _is_integer(duck_type) and kind in ("int", "bytes"):
        return f"CAST({source} AS BIGINT)"
    if _is_numeric(duck_type) and kind in _NUMERIC_CASTS:
        return _NUMERIC_CASTS[kind].format(source)  # typed by the reader: no parsing needed
    if kind == "text" and duck_type == "VARCHAR":
        return f"nullif({source}, '')"
    macro = {"int": "oomlab_int", "float": "oomlab_float", "bytes": "oomlab_bytes", "text": "oomlab_text"}[kind]
    return f"{macro}({source})"


def _ts_sql(source: str, duck_type: str) -> str:
    if duck_type == "TIMESTAMP WITH TIME ZONE":
        return f"CAST({source} AS TIMESTAMP)"  # the session's TimeZone is UTC (load.connect)
    if duck_type.startswith("TIMESTAMP") or duck_type == "DATE":
        return f"oomlab_ts_naive(CAST({source} AS TIMESTAMP), $tz)"
    if _is_numeric(duck_type):
        return f"oomlab_ts_epoch(CAST({source} AS DOUBLE))"
    return f"oomlab_ts_text(CAST({source} AS VARCHAR), $tz)"


def _check_sql(field: Field, source: str, duck_type: str, converted: str) -> str:
    """A reject reason when a present value does not convert (typed columns always do) or, for a time, when it
    is no time a GPU log can carry; else NULL."""
    unreadable = _unreadable_sql(field, source, duck_type, converted)
    if field.kind != "ts":
        return unreadable
    implausible = (
        f"CASE WHEN {converted} < TS_EARLIEST() OR {converted} > CAST(now() AS TIMESTAMP) + TS_AHEAD() "
        f"THEN '{field.name}: ' || strftime({converted}, '%Y-%m-%d %H:%M:%S') || ' is before 2007 or more than a "
        "year ahead: no GPU log was written then' END"
    )
    return implausible if unreadable == "NULL" else f"coalesce({unreadable}, {implausible})"


def _unreadable_sql(field: Field, source: str, duck_type: str, converted: str) -> str:
    """A reject reason when a present value does not convert, else NULL (typed columns always convert)."""
    if field.kind == "text" or (_is_numeric(duck_type) and field.kind in ("bytes", "float")):
        return "NULL"
    if _is_integer(duck_type) or duck_type.startswith(("TIMESTAMP", "DATE")):
        return "NULL"
    present = f"{source} IS NOT NULL"
    if duck_type == "VARCHAR":
        present += f" AND trim({source}) <> ''"
    shown = f"left(CAST({source} AS VARCHAR), 60)"
    return (
        f"CASE WHEN {present} AND {converted} IS NULL "
        f"THEN '{field.name}: ' || {shown} || ' is not {_WHAT[field.kind]}' END"
    )


@dataclass(frozen=True)
class Staged:
    """A SELECT over a stage giving canonical columns, `extra`, `line`, `reject_reason` (a value that does not
    convert), `possible` (false: values no device can have) and `raw` (of the rows either sets aside)."""

    sql: str
    params: dict[str, object]
    mapping: dict[str, list[str]]  # canonical field -> source columns it is read from


def _field_sql(stage: Stage, field: Field, columns: list[str]) -> tuple[str, list[str]]:
    """The converted value of a field (first non-NULL of its columns) and the checks of each column."""
    converted, checks = [], []
    for column in columns:
        source, duck_type = stage.column_sql(column), stage.columns[column]
        value = convert_sql(field.kind, source, duck_type)
        converted.append(value)
        checks.append(_check_sql(field, source, duck_type, value))
    value = converted[0] if len(converted) == 1 else f"coalesce({', '.join(converted)})"
    return value, [c for c in checks if c != "NULL"]


def _missing_ts_sql(stage: Stage, columns: list[str]) -> str:
    """'missing timestamp' when no timestamp column has a value (a bad value has its own reason)."""
    present = [
        f"nullif(trim({stage.column_sql(c)}), '')" if stage.columns[c] == "VARCHAR" else stage.column_sql(c)
        for c in columns
    ]
    if not present:
        return "'missing timestamp'"
    return f"CASE WHEN coalesce({', '.join(present)}) IS NULL THEN 'missing timestamp' END"


# The arguments of sql/macros/oomlab_request_possible.sql (and _impossible), in their order.
PHYSICAL_ARGS = (
    "gpu_index",
    "latency_ms",
    "batch_size",
    "input_sequence_length",
    "output_sequence_length",
    "requested_size",
    "available_memory",
    "allocator_allocated",
    "reserved_memory",
    "allocated_before",
    "allocated_after",
    "reserved_before",
    "reserved_after",
    "peak_allocated",
    "device_total",
)


def _possible_sql(values: dict[str, str]) -> str:
    """Whether a row's converted values could be a device's (no negative size, nothing above the card, reserved
    not below allocated); NULL stands in for a field the log does not have. A row that could not is set aside
    instead of turning into water levels above 100 %. Only this boolean is computed per row: the reasons
    (oomlab_request_impossible) take DuckDB 0.15 s to plan, so sql/ingest/insert_stage_rejects.sql writes them,
    and only for a file that has rejects."""
    return f"oomlab_request_possible({', '.join(values.get(name, 'NULL') for name in PHYSICAL_ARGS)})"


def staged_select(stage: Stage, fields: tuple[Field, ...] = FIELDS, tz: str | None = None) -> Staged:
    """The normalizing SELECT for a stage; `raw` is built only for rejected rows."""
    mapping = resolve_columns(list(stage.columns), fields)
    selects, checks = [], []
    values: dict[str, str] = {}
    for field in fields:
        if field.name not in mapping:
            selects.append(f"NULL AS {field.name}")
            continue
        values[field.name], field_checks = _field_sql(stage, field, mapping[field.name])
        selects.append(f"{values[field.name]} AS {field.name}")
        checks.extend(field_checks)
    checks.append(_missing_ts_sql(stage, mapping.get("ts", [])))
    # A row the stage could not read at all (bad JSON) gets only that reason.
    reason = f"coalesce({stage.guard}, nullif(concat_ws('; ', {', '.join(checks)}), ''))"
    possible = _possible_sql(values)
    consumed = {c for columns in mapping.values() for c in columns}
    # CASE evaluates its branch only for the rows that take it: raw text costs nothing for good rows.
    sql = (
        f"SELECT {stage.line} AS line, {', '.join(selects)}, "
        f"{stage.extra_sql(consumed)} AS extra, {reason} AS reject_reason, {possible} AS possible, "
        f"CASE WHEN {reason} IS NOT NULL OR NOT {possible} THEN CAST({stage.raw} AS VARCHAR) END AS raw "
        f"FROM {stage.relation}"
    )
    params = {**stage.params, "tz": tz}
    return Staged(sql, bind(sql, params), mapping)
