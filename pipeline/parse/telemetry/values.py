"""What every GPU telemetry reader shares: the columns of its two tables, the row it hands to ingest, and the
values nvidia-smi and its kin print (an amount with its unit, `N/A` and the other words for no value, the
`Tue Mar 12 10:20:30 2024` clock line of the table and of `-q`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo

from ...units import UNIT_BYTES, to_utc_naive

GPU_SAMPLES, PROCESS_SAMPLES = "gpu_samples", "gpu_process_samples"
RAW_LIMIT = 2000

# The columns a reader may fill (ingest adds source_id, instance and origin; a missing key is NULL).
GPU_COLUMNS: tuple[str, ...] = (
    "line",
    "ts",
    "gpu_index",
    "gpu_name",
    "gpu_uuid",
    "gpu_bus_id",
    "memory_used_bytes",
    "memory_total_bytes",
    "memory_free_bytes",
    "memory_reserved_bytes",
    "utilization_gpu",
    "utilization_memory",
    "temperature",
    "power_w",
    "mig_instance_id",
    "mig_profile",
    "hostname",
    "pod",
    "namespace",
    "container",
)
PROCESS_COLUMNS: tuple[str, ...] = (
    "line",
    "ts",
    "pid",
    "process_name",
    "used_bytes",
    "gpu_uuid",
    "gpu_bus_id",
    "gpu_index",
    "mig_instance_id",
)


@dataclass(frozen=True, slots=True)
class TelemetryRow:
    """One row a reader found: the table it belongs to and its columns (`ts` None: the source gave no time)."""

    table: str
    row: dict[str, object]


# What nvidia-smi, DCGM and rocm-smi print where they have no value (lower case). Anything in brackets is one
# too: nvidia-smi brackets every message it writes in a value's place (`[Not Found]`, `[Unknown Error]`).
_NO_VALUE = frozenset(
    {
        "",
        "n/a",
        "na",
        "none",
        "unknown",
        "not supported",
        "not found",
        "not available",
        "no data",
        "unknown error",
        "insufficient permissions",
        "gpu is lost",
        "gpu requires reset",
        "requested functionality has been deprecated",
        "err!",  # the table's word for a reading that failed
    }
)
_AMOUNT = re.compile(r"^([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%°]*)$")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CLOCK = re.compile(
    r"^(?:mon|tue|wed|thu|fri|sat|sun)\s+(" + "|".join(_MONTHS) + r")\s+(\d{1,2})"
    r"\s+(\d{1,2}):(\d{2}):(\d{2})\s+(\d{4})$",
    re.IGNORECASE,
)
BUS_ID = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
GPU_UUID = re.compile(r"^(?:GPU|MIG)-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}$")


def no_value(text: str) -> bool:
    """Whether a printed value says there is none (`N/A`, `[Not Supported]`, `Not available in WDDM ...`)."""
    value = text.strip().lower()
    return value in _NO_VALUE or (value.startswith("[") and value.endswith("]")) or value.startswith("not available")


def name_or_none(text: str) -> str | None:
    """A printed name, or None where the tool printed `N/A` or a bracketed message instead (a word such as
    `none` may well be a process's name, so only these)."""
    value = text.strip()
    return None if value in ("", "N/A") or (value.startswith("[") and value.endswith("]")) else value


def amount(text: str) -> tuple[float, str] | None:
    """`11125MiB` -> (11125.0, 'MiB'), `52C` -> (52.0, 'C'), `100%` -> (100.0, '%'); None when not an amount."""
    match = _AMOUNT.match(text.strip())
    return (float(match[1]), match[2]) if match else None


def numeric(text: str) -> float | None:
    """The number of a printed amount, whatever its unit; None for no value. Raises ValueError otherwise."""
    if no_value(text):
        return None
    found = amount(text)
    if found is None:
        raise ValueError(f"{text.strip()!r} is not a number")
    return found[0]


def memory_bytes(text: str, default_unit: str = "MiB") -> int | None:
    """A printed memory amount in bytes (nvidia-smi's MiB and MB are both binary); None for no value."""
    if no_value(text):
        return None
    found = amount(text)
    if found is None:
        raise ValueError(f"{text.strip()!r} is not a memory amount")
    multiplier = UNIT_BYTES.get((found[1] or default_unit).lower())
    if multiplier is None:
        raise ValueError(f"unknown memory unit {found[1]!r}")
    return round(found[0] * multiplier)


def integer(text: str) -> int | None:
    """A printed whole number; None for no value. Raises ValueError otherwise."""
    value = text.strip()
    if no_value(value):
        return None
    if not value.isdigit():
        raise ValueError(f"{value!r} is not an integer")
    return int(value)


def clock_time(text: str, zone: tzinfo | None) -> datetime | None:
    """`Tue Jul 14 09:00:43 2026` (the clock of the host, read in `zone`) as naive UTC; None when not one."""
    match = _CLOCK.match(text.strip())
    if match is None:
        return None
    month = _MONTHS.index(match[1].lower()) + 1
    moment = datetime(int(match[6]), month, int(match[2]), int(match[3]), int(match[4]), int(match[5]))
    return to_utc_naive(moment, zone)


def bus_id(text: str) -> str | None:
    """A PCI bus id as printed (`00000000:00:09.0`, the older `0000:01:00.0`); None for anything else (a
    value cut or redacted by whoever pasted it)."""
    value = text.strip()
    return value if BUS_ID.match(value) else None


# How many lines of other text a printed report may carry (a shell prompt, the command) and still be one: a
# text log that only begins with a report (`nvidia-smi && python train.py`) is a text log, read for its OOMs.
STRAY_LINES = 3


def mostly_report(lines: list[str], belongs: Callable[[str], bool]) -> bool:
    """Whether all but STRAY_LINES of the non-blank lines belong to the report."""
    stray = sum(1 for line in lines if line.strip() and not belongs(line))
    return stray <= STRAY_LINES
