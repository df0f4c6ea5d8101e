"""Byte sizes and timestamps: as logs write them (parsing), and as oomlab writes them for people (one formatter)."""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

# Binary multiples throughout: frameworks that print "GB" mean GiB (docs/domain.md), and so do our logs.
KIB, MIB, GIB, TIB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
# The units oomlab writes, smallest first (PyTorch's names).
BYTE_UNITS: dict[str, int] = {"B": 1, "KiB": KIB, "MiB": MIB, "GiB": GIB, "TiB": TIB}

UNIT_BYTES: dict[str, int] = {
    "": 1,
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
    "p": 1 << 50,
    "pb": 1 << 50,
    "pib": 1 << 50,
}


# The units a field mapping may give a byte field (`--map allocated_after=gpu_mem_mib:MiB`), by lower-case name.
# Binary like every size oomlab reads: a log's "MB" is MiB (as PyTorch's and nvidia-smi's are).
FIELD_UNITS: dict[str, int] = {
    "b": 1,
    "kb": KIB,
    "kib": KIB,
    "mb": MIB,
    "mib": MIB,
    "gb": GIB,
    "gib": GIB,
    "tb": TIB,
    "tib": TIB,
}
FIELD_UNIT_NAMES = "B, KB/KiB, MB/MiB, GB/GiB, TB/TiB; binary, MB = MiB"
# The units a time field's numbers may be stated in (`--map ts=timestamp:ms`), as microseconds per unit: an
# offset from the log's start (a trace replayed from 0) says its unit nowhere else.
TIME_UNITS: dict[str, float] = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3}
TIME_UNIT_NAMES = "s, ms, us, ns"


def field_unit_bytes(unit: str) -> int:
    """Bytes in one `unit` of a field mapping (case does not matter); ValueError naming it when it is none."""
    multiplier = FIELD_UNITS.get(unit.strip().lower())
    if multiplier is None:
        raise ValueError(f"unknown unit {unit!r} (units: {FIELD_UNIT_NAMES})")
    return multiplier


def unit_name(multiplier: int) -> str:
    """The name oomlab writes for a unit of `multiplier` bytes (`MiB`), or the bytes when no unit has them."""
    names = {v: k for k, v in BYTE_UNITS.items()}
    return names.get(multiplier, f"{multiplier:,} B")


def format_bytes(value: float, unit: str | None = None, digits: int = 2, *, grouped: bool = False) -> str:
    """Bytes for people in binary units: in `unit` with `digits` decimals, or, without a unit, in the largest
    unit that keeps the number at least 1 (PyTorch's style: `1.67 GiB`; plain bytes have no decimals).
    `grouped` adds thousands separators (`1,234.50 GiB`)."""
    comma = "," if grouped else ""
    if unit is not None:
        return f"{value / BYTE_UNITS[unit]:{comma}.{digits}f} {unit}"
    names = list(BYTE_UNITS)
    amount, index = float(value), 0
    while abs(amount) >= 1024 and index < len(names) - 1:  # divided step by step, as PyTorch's summary does
        amount /= 1024
        index += 1
    return f"{amount:{comma}.0f} B" if index == 0 else f"{amount:{comma}.{digits}f} {names[index]}"


def format_bytes_short(value: float) -> str:
    """Bytes in a sentence: `9.87 GiB` from a GiB up, else whole MiB (`522 MiB`)."""
    return format_bytes(value, "GiB") if abs(value) >= GIB else format_bytes(value, "MiB", 0)


_SIZE = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z]*)\s*$")


def size_to_bytes(number: str | float, unit: str = "") -> int:
    """`number unit` as whole bytes, rounded to nearest (messages print two decimals)."""
    if isinstance(number, str):
        return _text_size_to_bytes(number, unit)
    return _scaled(number, unit)


@functools.lru_cache(maxsize=1 << 13)
def _text_size_to_bytes(number: str, unit: str) -> int:
    """size_to_bytes of a size as text: the same few (`139.80 GiB`) recur in every message of a fleet."""
    return _scaled(float(number), unit)


def _scaled(number: float, unit: str) -> int:
    multiplier = UNIT_BYTES.get(unit.lower())
    if multiplier is None:
        raise ValueError(f"unknown size unit {unit!r}")
    return round(float(number) * multiplier)


def parse_bytes(value: object) -> int | None:
    """An integer, float or string such as `14.23 GiB`, `512MB`, `1.5e9` as bytes; None if empty."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return round(value)
    text = str(value)
    if not text.strip():
        return None
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a byte size")
    return size_to_bytes(match.group(1), match.group(2))


_EPOCH_DIVISORS = ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3), (0.0, 1.0))
_NVSMI = re.compile(r"^(\d{4})/(\d{2})/(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(\.\d+)?$")


def epoch_to_datetime(value: float) -> datetime:
    """Epoch seconds, milliseconds, microseconds or nanoseconds, told apart by magnitude. A whole number is read
    exactly (cut to the microsecond): nanoseconds since 1970 have more digits than a float holds."""
    for threshold, divisor in _EPOCH_DIVISORS:
        if abs(value) >= threshold:
            if isinstance(value, int):
                return datetime(1970, 1, 1) + timedelta(microseconds=value * 1_000_000 // int(divisor))
            return datetime(1970, 1, 1) + timedelta(seconds=value / divisor)
    raise ValueError(f"{value!r} is not an epoch time")  # pragma: no cover - the last threshold is 0


def to_utc_naive(moment: datetime, default_tz: tzinfo | None = None) -> datetime:
    """A naive UTC datetime; a naive input is read in `default_tz` (UTC when None)."""
    if moment.tzinfo is None:
        if default_tz is None:
            return moment
        moment = moment.replace(tzinfo=default_tz)
    return moment.astimezone(UTC).replace(tzinfo=None)


def parse_timestamp(value: object, default_tz: str | None = None) -> datetime | None:
    """ISO 8601, epoch s/ms/us/ns or `2026/11/30 01:49:09.001` as naive UTC; None if empty."""
    zone = ZoneInfo(default_tz) if default_tz else None
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        return to_utc_naive(value, zone)
    if isinstance(value, (int, float)):
        return epoch_to_datetime(float(value))
    text = str(value).strip()
    if not text:
        return None
    try:
        return epoch_to_datetime(float(text))
    except ValueError:
        pass
    match = _NVSMI.match(text)
    if match:
        text = f"{match[1]}-{match[2]}-{match[3]}T{match[4]}:{match[5]}:{match[6]}{match[7] or ''}"
    try:
        return to_utc_naive(datetime.fromisoformat(text.replace("Z", "+00:00")), zone)
    except ValueError:
        raise ValueError(f"{text!r} is not a timestamp") from None


def file_name(path: object) -> str:
    """The last part of a stored path, whatever the separator of the machine that ingested it: reports show
    file names, not a machine's folders."""
    return str(path or "").replace("\\", "/").rsplit("/", 1)[-1]


def ooms_text(count: float) -> str:
    """`1 OOM`, `2 OOMs`, `1,204 OOMs`: a count of OOMs as findings, pages and the terminal write it."""
    n = round(count)
    return f"{n:,} OOM" if n == 1 else f"{n:,} OOMs"


def format_share(fraction: float) -> str:
    """0.973 -> "97 %": how oomlab writes a confidence or a share, on pages and in the terminal alike."""
    return f"{100 * fraction:.0f} %"


# Prometheus' duration units (`promql/parser/lex.go`, model.ParseDuration): a year is 365 days, a week 7.
_DURATION_UNITS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
_DURATION_PART = re.compile(r"(\d+)(ms|[ywdhms])")


def parse_duration(text: str) -> timedelta | None:
    """A positive duration as Prometheus writes one (`30s`, `1m30s`, `15d`, `1y2w`) or plain seconds (`30`,
    `0.5`); None when the text is not one."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        pieces = _DURATION_PART.findall(text)
        if not pieces or "".join(n + u for n, u in pieces) != text:
            return None
        seconds = sum(int(n) * _DURATION_UNITS[u] for n, u in pieces)
    return timedelta(seconds=seconds) if seconds > 0 and seconds == seconds and seconds != float("inf") else None
