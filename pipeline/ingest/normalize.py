"""Normalize a staged request log into typed canonical columns, each bad row with its reason.

The conversions are SQL macros (`sql/macros/`); this module only picks, per canonical field, the
source column and the macro that suits the column's DuckDB type, and writes the checks that turn a
value that would not convert into a reject reason instead of a silent NULL, and the check that sets aside a
row whose values no device can have (`oomlab_request_possible`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..fields import FIELDS, LIFETIME_COLUMNS, Field, column_unit, normalise_name, resolve_columns
from ..load.sql import bind
from ..parse.structured import Stage
from ..units import TIME_UNITS
from .plausible import IMPLAUSIBLE_TIME

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
# Integer types whose every value fits a BIGINT: their conversion cannot fail (HUGEINT and UBIGINT can overflow).
_WITHIN_BIGINT = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER")
# Conversions of numbers the reader typed: TRY_CAST, so that a value no BIGINT holds (2^70, 1e30) is a reject of
# its row with the reason (`_unreadable_sql`), not an error that fails the file.
_NUMERIC_CASTS = {
    "bytes": "try_cast(round({0}) AS BIGINT)",
    # NaN and the infinities are no latency or rate: NULL, so the row is a reject with its reason
    "float": "CASE WHEN isfinite(CAST({0} AS DOUBLE)) THEN CAST({0} AS DOUBLE) END",
    "int": "oomlab_int({0})",
}
_TEXT_MACROS = {"int": "oomlab_int", "float": "oomlab_float", "bytes": "oomlab_bytes", "text": "oomlab_text"}
_WHAT = {"ts": "a timestamp", "int": "an integer", "float": "a number", "bytes": "a byte size", "text": "text"}


def _is_numeric(duck_type: str) -> bool:
    return duck_type.startswith(_NUMERIC)


def _is_integer(duck_type: str) -> bool:
    return duck_type.startswith(_INTEGER)


def _is_text(duck_type: str) -> bool:
    return duck_type == "VARCHAR"


def _as_text_sql(source: str, duck_type: str) -> str:
    """A column that is neither text nor a number nor a time, as text read value by value.

    DuckDB's reader types a column JSON when its sample mixes representations (an epoch number among ISO
    times, "3.5 GiB" among integers, `true` among counts): each value is then read on its own merits from its
    JSON text, a string unquoted. BOOLEAN becomes 'true'/'false', which no numeric field accepts; nested
    values become their JSON text.
    """
    if duck_type == "JSON":
        return f"json_extract_string({source}, '$')"
    if duck_type.startswith(("STRUCT", "MAP")) or duck_type.endswith("[]"):
        return f"CAST(to_json({source}) AS VARCHAR)"
    return f"CAST({source} AS VARCHAR)"


def field_source(source: str, duck_type: str) -> tuple[str, str]:
    """(source, type) a field is converted from: a column of another type is read as text, per value."""
    if _is_text(duck_type) or _is_numeric(duck_type) or duck_type.startswith(("TIMESTAMP", "DATE")):
        return source, duck_type
    return _as_text_sql(source, duck_type), "VARCHAR"


def convert_sql(kind: str, source: str, duck_type: str, per_unit: float = 1) -> str:
    """SQL converting `source` (of DuckDB type `duck_type`, after `field_source`) to the canonical kind;
    NULL where the value does not convert (`_unreadable_sql` gives its reason). `per_unit`: the bytes one of a
    byte field's bare numbers stands for, the microseconds one of the time's does (0 when not stated) or the
    milliseconds one of the latency's does (`fields.column_unit`)."""
    if kind == "bytes" and per_unit != 1:
        return _scaled_bytes_sql(source, duck_type, int(per_unit))
    if kind == "ts":
        return _ts_sql(source, duck_type, per_unit)
    if kind == "float" and per_unit != 1:  # a latency in seconds (`--map latency_ms=e2e_latency_s:s`)
        return f"({convert_sql(kind, source, duck_type)}) * {float(per_unit)!r}"
    if _is_integer(duck_type) and kind in ("int", "bytes"):
        return f"try_cast({source} AS BIGINT)"
    if _is_numeric(duck_type) and kind in _NUMERIC_CASTS:
        return _NUMERIC_CASTS[kind].format(source)  # typed by the reader: no parsing needed
    if kind == "text" and _is_text(duck_type):
        return f"nullif({source}, '')"
    return f"{_TEXT_MACROS[kind]}({source})"


def _scaled_bytes_sql(source: str, duck_type: str, per_unit: int) -> str:
    """Bytes from a column whose numbers are in a unit of `per_unit` bytes (MiB, GiB, ...), rounded to whole bytes
    (81050.5 MiB is a whole number of bytes, 1.3 KiB is not). Through DOUBLE, exact for any size below 2^53
    bytes; TRY_CAST, so that a number no BIGINT holds once scaled is a reject of its row, as it is unscaled. A
    string with a unit of its own (`14.23 GiB`) keeps its unit (`oomlab_bytes_in`). `per_unit` is one of
    oomlab's unit sizes (units.FIELD_UNITS), an integer written as such, never text from the log."""
    if _is_numeric(duck_type):
        return f"try_cast(round(CAST({source} AS DOUBLE) * {int(per_unit)}) AS BIGINT)"
    return f"oomlab_bytes_in({source}, {int(per_unit)})"


# --at as a typed parameter: DuckDB cannot type a NULL one from its use in arithmetic.
AT_SQL = "CAST($at AS TIMESTAMP)"


def _ts_sql(source: str, duck_type: str, per_unit: float = 0) -> str:
    """A time from a typed time, a number or text. A number is read by oomlab_ts_number, in the unit the mapping
    states (`per_unit` microseconds, 0: told by its size), after --at when it is a time from the log's start."""
    if duck_type == "TIMESTAMP WITH TIME ZONE":
        # Its UTC instant, naive: the stored microseconds taken as they are. A CAST converts through the
        # session's time zone (UTC, load.connect) with ICU's calendar, 10x slower per row (0.12 s of a 2M-row
        # log here); it stays for +-infinity, which make_timestamp turns into NULL (CAST: year 9999 or 1,
        # which the plausibility check rejects).
        instant = f"make_timestamp(epoch_us({source}))"
        return f"CASE WHEN isfinite({source}) THEN {instant} ELSE CAST({source} AS TIMESTAMP) END"
    if duck_type.startswith("TIMESTAMP") or duck_type == "DATE":
        return f"oomlab_ts_naive(CAST({source} AS TIMESTAMP), $tz)"
    unit = repr(float(per_unit))
    if _is_numeric(duck_type):
        return f"oomlab_ts_number(CAST({source} AS DOUBLE), {AT_SQL}, {unit})"
    return f"oomlab_ts_text(CAST({source} AS VARCHAR), $tz, {AT_SQL}, {unit})"


def _check_sql(field: Field, source: str, duck_type: str, converted: str, per_unit: float = 1) -> str:
    """A reject reason when a present value does not convert or, for a time, when it is no time a GPU log can
    carry (a number that is a time from the log's start says so, and how to place it); else NULL."""
    unreadable = _unreadable_sql(field, source, duck_type, converted, per_unit)
    if field.kind != "ts":
        return unreadable
    implausible = f"'{field.name}: ' || strftime({converted}, '%Y-%m-%d %H:%M:%S') || ' {IMPLAUSIBLE_TIME}'"
    relative = _relative_sql(source, duck_type, per_unit)
    if relative is not None:
        unit = next((k for k, v in TIME_UNITS.items() if v == per_unit), "s")
        implausible = (
            f"CASE WHEN {relative} THEN '{field.name}: ' || left(CAST({source} AS VARCHAR), 60) || "
            f"' is a time from the log''s start (read in {unit}; map another unit: --map {field.name}=FIELD:ms), "
            f"not a moment: pass --at with when it started' "
            f"ELSE {implausible} END"
        )
    implausible = f"CASE WHEN {converted} < TS_EARLIEST() OR {converted} >= TS_LATEST() THEN {implausible} END"
    return implausible if unreadable == "NULL" else f"coalesce({unreadable}, {implausible})"


def _relative_sql(source: str, duck_type: str, per_unit: float) -> str | None:
    """Whether a row's time is a number no moment is written as (oomlab_ts_relative): a time from the log's start.
    None for a typed time, which is always a moment."""
    if duck_type.startswith(("TIMESTAMP", "DATE")):
        return None
    number = f"CAST({source} AS DOUBLE)" if _is_numeric(duck_type) else f"try_cast({source} AS DOUBLE)"
    return f"coalesce(oomlab_ts_relative({number}, {float(per_unit)!r}), false)"


def _converts_always(kind: str, duck_type: str, per_unit: float = 1) -> bool:
    """Conversions that cannot fail: text, times the reader typed, integers within BIGINT. A byte field in a unit
    can fail (its numbers are multiplied, and a large one leaves BIGINT), and so can a float (NaN, infinity)."""
    if kind == "bytes" and per_unit != 1:
        return False
    if kind == "text" or duck_type.startswith(("TIMESTAMP", "DATE")):
        return True
    # a float from a floating type can be NaN or infinite, which is a reject: only integers convert always
    return duck_type.startswith(_WITHIN_BIGINT) and kind in ("int", "bytes", "float")


def _unreadable_sql(field: Field, source: str, duck_type: str, converted: str, per_unit: float = 1) -> str:
    """A reject reason when a present value does not convert, else NULL."""
    if _converts_always(field.kind, duck_type, per_unit):
        return "NULL"
    present = f"{source} IS NOT NULL"
    if _is_text(duck_type):
        present += f" AND trim({source}) <> ''"
    shown = f"left(CAST({source} AS VARCHAR), 60)"
    # A number (typed, or text that reads as one) fails only by its size or, for a count, a fraction: the reason
    # says so whichever reader read it, so that the same value gets the same reason on either path.
    numeric = "a whole number in range" if field.kind == "int" else f"{_WHAT[field.kind]} in range"
    if _is_numeric(duck_type):
        what = f"'{numeric}'"
    else:
        what = f"CASE WHEN try_cast({source} AS DOUBLE) IS NULL THEN '{_WHAT[field.kind]}' ELSE '{numeric}' END"
    return f"CASE WHEN {present} AND {converted} IS NULL THEN '{field.name}: ' || {shown} || ' is not ' || {what} END"


@dataclass(frozen=True)
class Staged:
    """A SELECT over a stage giving canonical columns, `extra`, `line`, `reject_reason` (a value that does not
    convert), `possible` (false: values no device can have) and `raw` (of the rows either sets aside)."""

    sql: str
    params: dict[str, object]
    mapping: dict[str, list[str]]  # canonical field -> source columns it is read from
    values: dict[str, str]  # canonical field -> SQL of its converted value over the stage (as `sql` selects it)
    # with --at: whether a row's time was placed by it (a time from the log's start, or no time at all), over the
    # stage; None without --at
    anchored: str | None = None


def _field_sql(stage: Stage, field: Field, columns: list[str]) -> tuple[str, list[str]]:
    """The converted value of a field (first non-NULL of its columns) and the checks of each column."""
    converted, checks = [], []
    for column in columns:
        source, duck_type = field_source(stage.column_sql(column), stage.columns[column])
        per_unit = column_unit(field, column)
        value = convert_sql(field.kind, source, duck_type, per_unit)
        converted.append(value)
        checks.append(_check_sql(field, source, duck_type, value, per_unit))
    value = converted[0] if len(converted) == 1 else f"coalesce({', '.join(converted)})"
    return value, [c for c in checks if c != "NULL"]


def _missing_ts_sql(stage: Stage, columns: list[str]) -> str:
    """'missing timestamp' when no timestamp column has a value (a bad value has its own reason)."""
    absent = [_absent_sql(*field_source(stage.column_sql(c), stage.columns[c])) for c in columns]
    if not absent:
        return "'missing timestamp'"
    return f"CASE WHEN {' AND '.join(absent)} THEN 'missing timestamp' END"


def _anchored_sql(stage: Stage, columns: list[str], fields: tuple[Field, ...]) -> str:
    """With --at, whether a row's time was placed by it: every row of a log without a time column, else a row
    whose first time column holds a time from the log's start."""
    if not columns:
        return "true"
    source, duck_type = field_source(stage.column_sql(columns[0]), stage.columns[columns[0]])
    field = next(f for f in fields if f.name == "ts")
    return _relative_sql(source, duck_type, column_unit(field, columns[0])) or "false"


def _absent_sql(source: str, duck_type: str) -> str:
    """Whether a column has no value: NULL, or blank text. A typed value is tested as it is, not as text (casting
    every timestamp to text made a 2M-line log's insert about 0.4 s slower)."""
    return f"nullif(trim({source}), '') IS NULL" if _is_text(duck_type) else f"{source} IS NULL"


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


def staged_select(
    stage: Stage, fields: tuple[Field, ...] = FIELDS, tz: str | None = None, at: datetime | None = None
) -> Staged:
    """The normalizing SELECT for a stage; `raw` is built only for rejected rows. `at` (--at): when the log
    started, for times written from its start, and the time of every row of a log that states none."""
    mapping = resolve_columns(list(stage.columns), fields)
    selects, checks = [], []
    values: dict[str, str] = {}
    timeless = at is not None and "ts" not in mapping
    for field in fields:
        if field.name == "ts" and timeless:
            values["ts"] = AT_SQL  # a log that states no time: every row was taken when --at says
            selects.append(f"{AT_SQL} AS ts")
            continue
        if field.name not in mapping:
            selects.append(f"NULL AS {field.name}")
            continue
        values[field.name], field_checks = _field_sql(stage, field, mapping[field.name])
        selects.append(f"{values[field.name]} AS {field.name}")
        checks.extend(field_checks)
    if not timeless:
        checks.append(_missing_ts_sql(stage, mapping.get("ts", [])))
    # A row the stage could not read at all (bad JSON) gets only that reason.
    reason = f"coalesce({stage.guard}, nullif(concat_ws('; ', {', '.join(checks)}), ''))"
    possible = _possible_sql(values)
    # a lifetime's column stays in extra even where it stands in for the instance (fields.LIFETIME_COLUMNS)
    consumed = {c for columns in mapping.values() for c in columns if normalise_name(c) not in LIFETIME_COLUMNS}
    # CASE evaluates its branch only for the rows that take it: raw text costs nothing for good rows.
    sql = (
        f"SELECT {stage.line} AS line, {', '.join(selects)}, "
        f"{stage.extra_sql(consumed)} AS extra, {reason} AS reject_reason, {possible} AS possible, "
        f"CASE WHEN {reason} IS NOT NULL OR NOT {possible} THEN CAST({stage.raw} AS VARCHAR) END AS raw "
        f"FROM {stage.relation}"
    )
    params = {**stage.params, "tz": tz, "at": at}
    anchored = None if at is None else _anchored_sql(stage, mapping.get("ts", []), fields)
    return Staged(sql, bind(sql, params), mapping, values, anchored)
