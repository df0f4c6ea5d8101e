"""The canonical request-log fields, their kinds and the names real logs give them (mapping as data)."""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import OomlabError, UsageError
from .units import FIELD_UNIT_NAMES, FIELD_UNITS, TIME_UNIT_NAMES, TIME_UNITS, field_unit_bytes


@dataclass(frozen=True, slots=True)
class Field:
    """One canonical column: `kind` picks its conversion; `aliases` are other names logs use for it; `units`
    the unit a mapping states for one of them (its loose name, and bytes per unit for a byte field, microseconds
    per unit for the time, milliseconds per unit for the latency)."""

    name: str
    kind: str  # ts | text | int | float | bytes
    aliases: tuple[str, ...] = ()
    units: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Mapped:
    """One entry of a user's mapping: the log's name for a field and, for a byte field or the time, the unit its
    bare numbers are in (`MiB`, `ms`), None when the mapping does not say."""

    column: str
    unit: str | None = None


FIELDS: tuple[Field, ...] = (
    Field("ts", "ts", ("timestamp", "@timestamp", "time", "datetime", "event_time", "created_at")),
    # the device: a host or Kubernetes node first; a pod only where nothing names the node (a pod is one process
    # lifetime, renamed on every restart: LIFETIME_COLUMNS keeps it beside the node)
    Field(
        "instance",
        "text",
        (
            "host",
            "hostname",
            "node",
            "node_name",
            "nodename",
            "kubernetes.node_name",
            "kubernetes.host",
            "k8s_node",
            "server",
            "pod",
            "pod_name",
            "kubernetes.pod_name",
        ),
    ),
    Field("gpu_index", "int", ("gpu", "gpu_id", "gpu_idx", "device_index", "cuda_device")),
    Field("model_version", "text", ("model", "model_name", "model_id", "version")),
    Field("request_id", "text", ("req_id", "requestid", "id", "trace_id")),
    Field("status", "text", ("state", "result", "outcome")),
    Field("error", "text", ("error_message", "exception", "err")),
    # total_latency_ms: a vLLM request tracer's (corpus requests/011 and 012)
    Field("latency_ms", "float", ("latency", "duration_ms", "elapsed_ms", "total_latency_ms")),
    Field("batch_size", "int", ("batch", "bs", "num_seqs")),
    # and the names published serving traces give them: Azure's LLM inference traces (ContextTokens,
    # GeneratedTokens), BurstGPT (Request tokens, Response tokens), LLMPerf's per-request results
    # (number_input_tokens), Vidur's processed traces (num_prefill_tokens, num_decode_tokens)
    Field(
        "input_sequence_length",
        "int",
        (
            "input_len",
            "input_length",
            "prompt_len",
            "prompt_length",
            "prompt_tokens",
            "input_tokens",
            "ContextTokens",
            "Request tokens",
            "number_input_tokens",
            "num_prefill_tokens",
        ),
    ),
    Field(
        "output_sequence_length",
        "int",
        (
            "output_len",
            "output_length",
            "max_new_tokens",
            "output_tokens",
            "completion_tokens",
            "GeneratedTokens",
            "Response tokens",
            "number_output_tokens",
            "num_decode_tokens",
        ),
    ),
    Field("requested_size", "bytes", ("requested_bytes", "alloc_size", "requested")),
    Field("available_memory", "bytes", ("free_memory", "device_free", "free_bytes", "available_bytes")),
    Field("allocator_allocated", "bytes", ("memory_allocated", "allocated", "allocated_bytes")),
    Field("reserved_memory", "bytes", ("memory_reserved", "reserved", "reserved_bytes")),
    Field("allocated_before", "bytes", ("memory_allocated_before",)),
    Field("allocated_after", "bytes", ("memory_allocated_after",)),
    Field("reserved_before", "bytes", ("memory_reserved_before",)),
    Field("reserved_after", "bytes", ("memory_reserved_after",)),
    Field(
        "peak_allocated", "bytes", ("allocated_peak", "max_allocated", "max_memory_allocated", "peak_memory", "peak")
    ),
    Field("device_total", "bytes", ("total_memory", "device_memory", "gpu_memory_total", "memory_total")),
)

FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)

# Columns that name a process lifetime (a pod, renamed on every restart; a container): kept in `extra` even when
# they stand in for the instance, so that stg_requests reads each request's lifetime beside its device.
LIFETIME_COLUMNS: frozenset[str] = frozenset({"pod", "pod_name", "kubernetes.pod_name", "container_id"})

_BLANKS = re.compile(r"[\s\-]+")

# Fields whose presence tells a request log from any other structured file (ts alone does not).
REQUEST_EVIDENCE: frozenset[str] = frozenset(FIELD_NAMES) - {"ts", "instance", "status", "error", "request_id"}

# A byte field's column may end its name in the unit of its numbers: the field's name or any alias, then `_mib`
# (`allocated_after_mib`, `reserved_memory_gib`, `free_bytes`). `_b` is not read as bytes: it abbreviates
# "before" as often (`allocated_b` / `allocated_a`), and "billion".
NAME_UNITS: dict[str, int] = {"bytes": 1, **{name: size for name, size in FIELD_UNITS.items() if name != "b"}}


@functools.lru_cache(maxsize=1 << 12)
def normalise_name(name: str) -> str:
    """Column names compared loosely: case, blanks and dashes do not matter. Cached: every file compares its
    columns with every field's aliases, the same few hundred names each time."""
    return _BLANKS.sub("_", name.strip()).lower()


def with_mapping(mapping: Mapping[str, str | Mapped], fields: tuple[Field, ...] = FIELDS) -> tuple[Field, ...]:
    """The fields with the user's names (`canonical -> theirs`, a plain name or a `Mapped` with its unit) tried
    before the built-in aliases."""
    unknown = sorted(set(mapping) - set(FIELD_NAMES))
    if unknown:
        raise OomlabError(
            f"unknown field {unknown[0]!r} in mapping",
            hint=f"map one of: {', '.join(FIELD_NAMES)}",
        )
    entries = {name: value if isinstance(value, Mapped) else Mapped(value) for name, value in mapping.items()}
    return tuple(_mapped_field(f, entries[f.name]) if f.name in entries else f for f in fields)


def _mapped_field(field: Field, entry: Mapped) -> Field:
    """A field with the user's name first and, where the mapping gives one, the unit of that name's numbers."""
    mapped = replace(field, aliases=(entry.column, *field.aliases))
    if entry.unit is None:
        return mapped
    _check_unit(field.name, entry.unit, f"{field.name}={entry.column}")
    unit = (normalise_name(entry.column), _per_unit(field.name, entry.unit))
    return replace(mapped, units=(unit, *field.units))


# Fields whose numbers are times, and the microseconds one of their own numbers stands for: the time itself
# (microseconds, as oomlab_ts_number reads it) and the latency (milliseconds, its name says so).
TIMED_FIELDS: dict[str, float] = {"ts": 1.0, "latency_ms": 1e3}


def _per_unit(canonical: str, unit: str) -> float:
    """What one of a mapped column's numbers stands for in the field's own unit: microseconds for the time,
    milliseconds for the latency, bytes for a byte field."""
    if canonical in TIMED_FIELDS:
        return TIME_UNITS[unit.strip().lower()] / TIMED_FIELDS[canonical]
    return field_unit_bytes(unit)


def _takes_unit(canonical: str) -> bool:
    """Whether a field takes a unit: byte fields and the times."""
    return canonical in TIMED_FIELDS or _kind(canonical) == "bytes"


def _check_unit(canonical: str, unit: str, where: str, hint: str | None = None) -> None:
    """A UsageError naming `where` when `unit` is no unit of the field's kind, or the field takes none (only byte
    fields and the times have one)."""
    if canonical in TIMED_FIELDS:
        if unit.strip().lower() not in TIME_UNITS:
            raise UsageError(f"{where}: unknown time unit {unit!r} (units: {TIME_UNIT_NAMES})", hint=hint)
        return
    kind = _kind(canonical)
    try:
        field_unit_bytes(unit)
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}", hint=hint) from None
    if kind != "bytes":
        byte_fields = ", ".join(f.name for f in FIELDS if f.kind == "bytes")
        raise UsageError(
            f"{where}: {canonical} takes no unit (byte fields: {byte_fields}; {' and '.join(TIMED_FIELDS)} take "
            f"{TIME_UNIT_NAMES})"
        )


def _kind(canonical: str) -> str:
    """A canonical field's kind; `bytes` for a name that is none (with_mapping reports it as unknown)."""
    return next((f.kind for f in FIELDS if f.name == canonical), "bytes")


def parse_map_options(pairs: tuple[str, ...]) -> dict[str, Mapped]:
    """`--map canonical=theirs` options, or `canonical=theirs:UNIT` for a byte field, as a dict. For a byte field the
    last colon starts a unit (a name holding one is mapped in a TOML file, `{ field = "a:b" }`); for any other
    field a colon that starts no unit is part of the name, as it always was."""
    mapping: dict[str, Mapped] = {}
    for pair in pairs:
        canonical, sep, theirs = pair.partition("=")
        if not sep or not canonical.strip() or not theirs.strip():
            raise OomlabError(
                f"--map {pair!r} is not canonical=theirs",
                hint="e.g. --map instance=pod_name, or --map allocated_after=gpu_mem_mib:MiB",
            )
        column, colon, unit = theirs.rpartition(":") if ":" in theirs else (theirs, "", "")
        if colon and not _takes_unit(canonical.strip()) and unit.strip().lower() not in FIELD_UNITS:
            column, colon, unit = theirs, "", ""  # only byte fields and times take a unit: the colon is the name's
        if colon:
            _check_unit(canonical.strip(), unit, f"--map {pair!r}", "a name with a colon is mapped in a --mapping file")
        if not column.strip():
            raise OomlabError(f"--map {pair!r} names no field of the log", hint="e.g. --map allocated_after=mem:MiB")
        mapping[canonical.strip()] = Mapped(column.strip(), unit.strip() or None)
    return mapping


def read_mapping_file(path: str | Path) -> dict[str, Mapped]:
    """A TOML mapping file: `canonical = "theirs"` or `canonical = { field = "theirs", unit = "MiB" }` entries, at
    top level or under `[fields]`."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise OomlabError(f"{path}: cannot read mapping file: {exc}") from exc
    return mapping_from_table(data.get("fields", data), str(path))


def mapping_from_table(table: object, where: str) -> dict[str, Mapped]:
    """A TOML table of mapping entries (a mapping file's, or a weekly config's `map`); errors name `where`."""
    if not isinstance(table, dict):
        raise OomlabError(f"{where}: the mapping is not a table", hint='write canonical = "their_name"')
    return {canonical: _table_entry(canonical, value, where) for canonical, value in table.items()}


def _table_entry(canonical: str, value: object, where: str) -> Mapped:
    """One TOML mapping entry: a name, or a table with `field` and an optional `unit`."""
    if isinstance(value, str):
        return Mapped(value)
    example = f'write {canonical} = "their_name" or {canonical} = {{ field = "their_name", unit = "MiB" }}'
    if not isinstance(value, dict) or not isinstance(value.get("field"), str) or not value["field"]:
        raise OomlabError(f"{where}: {canonical}: a mapping entry is a name or a table with a field", hint=example)
    unknown = sorted(set(value) - {"field", "unit"})
    if unknown:
        raise OomlabError(f"{where}: {canonical}: unknown key {unknown[0]!r} (keys: field, unit)", hint=example)
    unit = value.get("unit")
    if unit is not None and not isinstance(unit, str):
        raise UsageError(f"{where}: {canonical}: unit {unit!r} is not a unit name (units: {FIELD_UNIT_NAMES})")
    if unit is not None:
        _check_unit(canonical, unit, f"{where}: {canonical}")
    return Mapped(value["field"], unit)


def resolve_columns(available: list[str], fields: tuple[Field, ...] = FIELDS) -> dict[str, list[str]]:
    """For each canonical field present, the source columns that provide it, most preferred first.

    A log may name one field differently from row to row; the first non-empty column wins per row. Columns named
    as a field or alias come first; then, for byte fields, columns named so with a unit suffix (`_mib`), among
    those no field took by its name (so that a log read before suffixes were looks the same now).
    """
    by_loose = {normalise_name(c): c for c in reversed(available)}
    taken: set[str] = set()
    resolved: dict[str, list[str]] = {}
    for field in fields:
        columns = [by_loose[n] for n in _loose_names(field) if n in by_loose and by_loose[n] not in taken]
        if columns:
            resolved[field.name] = columns
            taken.update(columns)
    by_base = _suffixed_by_base(available, by_loose, taken)
    for field in fields:
        if field.kind != "bytes":
            continue
        columns = [c for n in _loose_names(field) for c in by_base.get(n, ()) if c not in taken]
        if columns:
            resolved[field.name] = [*resolved.get(field.name, ()), *columns]
            taken.update(columns)
    return {f.name: resolved[f.name] for f in fields if f.name in resolved}


def _loose_names(field: Field) -> tuple[str, ...]:
    """A field's name and aliases, loosely compared and each once, most preferred first."""
    return tuple(dict.fromkeys(normalise_name(a) for a in (field.name, *field.aliases)))


def name_unit(loose: str) -> tuple[str, int] | None:
    """(the name without its unit, bytes per unit) of a loose column name ending in a unit (`x_mib`), else None."""
    base, sep, suffix = loose.rpartition("_")
    return (base, NAME_UNITS[suffix]) if sep and base and suffix in NAME_UNITS else None


def _suffixed_by_base(available: list[str], by_loose: dict[str, str], taken: set[str]) -> dict[str, list[str]]:
    """Columns no field took whose names end in a unit, by the name before it, in the log's order."""
    by_base: dict[str, list[str]] = {}
    for column in available:
        loose = normalise_name(column)
        split = name_unit(loose)
        if split is not None and by_loose[loose] == column and column not in taken:
            by_base.setdefault(split[0], []).append(column)
    return by_base


def column_unit(field: Field, column: str) -> float:
    """Bytes per unit of the bare numbers a byte field reads from `column`: the unit the mapping states for it, else
    the unit its name ends in (`_mib`), else 1. A value with a unit of its own (`14.23 GiB`) keeps that one. For the
    time, the microseconds per unit the mapping states, else 0 (not stated: told by the numbers' size); for the
    latency, the milliseconds per unit it states, else 1."""
    if field.name == "ts":
        return dict(field.units).get(normalise_name(column), 0)
    if field.kind != "bytes":
        return dict(field.units).get(normalise_name(column), 1)
    loose = normalise_name(column)
    stated = dict(field.units).get(loose)
    if stated is not None:
        return stated
    suffix = name_unit(loose)
    return suffix[1] if suffix is not None else 1


def unit_stated(field: Field, column: str) -> bool:
    """Whether the user's mapping states the unit of `column` (then it is taken as said, never second-guessed)."""
    return normalise_name(column) in dict(field.units)


def looks_like_request_log(available: list[str], fields: tuple[Field, ...] = FIELDS) -> bool:
    """True when the columns name at least two request-specific canonical fields."""
    return len(REQUEST_EVIDENCE & set(resolve_columns(available, fields))) >= 2
