"""The canonical request-log fields, their kinds and the names real logs give them (mapping as data)."""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import OomlabError


@dataclass(frozen=True, slots=True)
class Field:
    """One canonical column: `kind` picks its conversion; `aliases` are other names logs use for it."""

    name: str
    kind: str  # ts | text | int | float | bytes
    aliases: tuple[str, ...] = ()


FIELDS: tuple[Field, ...] = (
    Field("ts", "ts", ("timestamp", "@timestamp", "time", "datetime", "event_time", "created_at")),
    Field("instance", "text", ("host", "hostname", "pod", "pod_name", "node", "node_name", "server")),
    Field("gpu_index", "int", ("gpu", "gpu_id", "gpu_idx", "device_index", "cuda_device")),
    Field("model_version", "text", ("model", "model_name", "model_id", "version")),
    Field("request_id", "text", ("req_id", "requestid", "id", "trace_id")),
    Field("status", "text", ("state", "result", "outcome")),
    Field("error", "text", ("error_message", "exception", "err")),
    Field("latency_ms", "float", ("latency", "duration_ms", "elapsed_ms")),
    Field("batch_size", "int", ("batch", "bs", "num_seqs")),
    Field(
        "input_sequence_length",
        "int",
        ("input_len", "input_length", "prompt_len", "prompt_length", "prompt_tokens", "input_tokens"),
    ),
    Field(
        "output_sequence_length",
        "int",
        ("output_len", "output_length", "max_new_tokens", "output_tokens", "completion_tokens"),
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

_BLANKS = re.compile(r"[\s\-]+")

# Fields whose presence tells a request log from any other structured file (ts alone does not).
REQUEST_EVIDENCE: frozenset[str] = frozenset(FIELD_NAMES) - {"ts", "instance", "status", "error", "request_id"}


@functools.lru_cache(maxsize=1 << 12)
def normalise_name(name: str) -> str:
    """Column names compared loosely: case, blanks and dashes do not matter. Cached: every file compares its
    columns with every field's aliases, the same few hundred names each time."""
    return _BLANKS.sub("_", name.strip()).lower()


def with_mapping(mapping: dict[str, str], fields: tuple[Field, ...] = FIELDS) -> tuple[Field, ...]:
    """The fields with the user's names (`canonical -> theirs`) tried before the built-in aliases."""
    unknown = sorted(set(mapping) - set(FIELD_NAMES))
    if unknown:
        raise OomlabError(
            f"unknown field {unknown[0]!r} in mapping",
            hint=f"map one of: {', '.join(FIELD_NAMES)}",
        )
    return tuple(replace(f, aliases=(mapping[f.name], *f.aliases)) if f.name in mapping else f for f in fields)


def parse_map_options(pairs: tuple[str, ...]) -> dict[str, str]:
    """`--map canonical=theirs` options as a dict."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        canonical, sep, theirs = pair.partition("=")
        if not sep or not canonical.strip() or not theirs.strip():
            raise OomlabError(f"--map {pair!r} is not canonical=theirs", hint="e.g. --map instance=pod_name")
        mapping[canonical.strip()] = theirs.strip()
    return mapping


def read_mapping_file(path: str | Path) -> dict[str, str]:
    """A TOML mapping file: `canonical = "theirs"` pairs, at top level or under `[fields]`."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise OomlabError(f"{path}: cannot read mapping file: {exc}") from exc
    table = data.get("fields", data)
    if not all(isinstance(v, str) for v in table.values()):
        raise OomlabError(f"{path}: mapping values must be strings", hint='write canonical = "their_name"')
    return dict(table)


def resolve_columns(available: list[str], fields: tuple[Field, ...] = FIELDS) -> dict[str, list[str]]:
    """For each canonical field present, the source columns that provide it, most preferred first.

    A log may name one field differently from row to row; the first non-empty column wins per row.
    """
    by_loose = {normalise_name(c): c for c in reversed(available)}
    taken: set[str] = set()
    resolved: dict[str, list[str]] = {}
    for field in fields:
        columns = [
            by_loose[n]
            for n in dict.fromkeys(normalise_name(a) for a in (field.name, *field.aliases))
            if n in by_loose and by_loose[n] not in taken
        ]
        if columns:
            resolved[field.name] = columns
            taken.update(columns)
    return resolved


def looks_like_request_log(available: list[str], fields: tuple[Field, ...] = FIELDS) -> bool:
    """True when the columns name at least two request-specific canonical fields."""
    return len(REQUEST_EVIDENCE & set(resolve_columns(available, fields))) >= 2
