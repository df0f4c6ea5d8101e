"""What PyTorch's caching allocator says about itself: `torch.cuda.memory_stats()` and `memory_summary()`.

Both print the same counters (torch/cuda/memory.py): `memory_stats()` as a flat dict of
`<metric>.<pool>.<stat>` keys (`allocated_bytes.large_pool.peak`) plus `num_ooms` and `num_alloc_retries`;
`memory_summary()` as a table with a row per metric (`Allocated memory`, ...) and its `from large pool` /
`from small pool` sub-rows, columns `Cur Usage | Peak Usage | Tot Alloc | Tot Freed` (stats `current`,
`peak`, `allocated`, `freed`). The summary prints sizes floored to whole units (`_format_size`: `sz //=
1024` while the size is at least 768 units), so a printed `2048 MiB` is [2048, 2049) MiB: bytes from a
summary are exact to the printed unit, from `memory_stats()` exact.

Each printout is one moment: an `AllocatorMoment` holds its counters, read into rows per pool by
`moment_rows`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from .text.textscan import MarkerFinder, Window

# The summary's row labels and the memory_stats() metric each prints (torch/cuda/memory.py
# `metrics_to_display`); `Non-releasable memory` is `inactive_split_bytes`.
SUMMARY_METRICS: dict[str, str] = {
    "Allocated memory": "allocated_bytes",
    "Active memory": "active_bytes",
    "Requested memory": "requested_bytes",
    "GPU reserved memory": "reserved_bytes",
    "Non-releasable memory": "inactive_split_bytes",
    "Allocations": "allocation",
    "Active allocs": "active",
    "GPU reserved segments": "segment",
    "Non-releasable allocs": "inactive_split",
}
_COLUMNS = ("current", "peak", "allocated", "freed")
_POOLS = {"from large pool": "large_pool", "from small pool": "small_pool"}
POOL_NAMES = {"all": "all", "large_pool": "large", "small_pool": "small"}
# PyTorch 1.x printed the same 1024-based prefixes as KB, MB, GB.
_UNITS = (
    {"B": 0}
    | {f"{p}iB": 10 * (i + 1) for i, p in enumerate("KMGTP")}
    | {f"{p}B": 10 * (i + 1) for i, p in enumerate("KMGTP")}
)

HEADER_MARKER = b"PyTorch CUDA memory summary"
# memory_stats() printed by Python (a dict or an OrderedDict, on one line or pretty-printed one key per
# line): the lines holding its keys.
_STATS_MARKERS = (
    *(f"{scope}.{stat}'".encode() for scope in ("all", "_pool") for stat in ("current", "peak", "allocated", "freed")),
    b"'num_ooms'",
    b"'num_alloc_retries'",
)
# Marker strings of the lines a summary is read from (textscan finds them; the rest of the table is rules).
SUMMARY_MARKERS: tuple[bytes, ...] = (
    HEADER_MARKER,
    b"CUDA OOMs:",
    *(f"| {label}".encode() for label in SUMMARY_METRICS),
    *(label.encode() for label in _POOLS),
    *_STATS_MARKERS,
)
SUMMARY_FINDER = MarkerFinder(SUMMARY_MARKERS)  # pass it to scan_text_log(also=...) to share the OOM scan's search
_HEADER = re.compile(r"PyTorch CUDA memory summary, device ID (\d+)")
_COUNTERS = re.compile(r"CUDA OOMs:\s*(\d+)\s*\|\s*cudaMalloc retries:\s*(\d+)")
_LABELS = "|".join(re.escape(label) for label in (*SUMMARY_METRICS, *_POOLS))
_ROW = re.compile(rf"\|\s*({_LABELS})\s*\|(.*)$")
_CELL = re.compile(r"^\s*(-?\d+)\s*(B|[KMGTP]i?B)?\s*$")
# A memory_stats() key: metric, pool and stat.
_STAT_KEY = re.compile(r"^(\w+)\.(all|large_pool|small_pool)\.(current|peak|allocated|freed)$")
_TOP_LEVEL = ("num_ooms", "num_alloc_retries")
# One counter of a printed dict: `'allocated_bytes.all.current': 123` or `('allocated_bytes.all.current', 123)`.
_PAIR = re.compile(
    r"""['"](\w+\.(?:all|large_pool|small_pool)\.(?:current|peak|allocated|freed)|num_ooms|num_alloc_retries)"""
    r"""['"]\s*[:,]\s*(-?\d+)"""
)
# A summary pasted as a Python string repr holds its rows on one line, separated by a literal backslash-n.
_LITERAL_NEWLINE = "\\n"


@dataclass
class AllocatorMoment:
    """One printout: its counters as memory_stats() keys (bytes, or counts), where it came from."""

    line: int
    origin: str  # 'memory_summary' or 'memory_stats'
    gpu_index: int | None = None
    ts: datetime | None = None
    stats: dict[str, int] = field(default_factory=dict)
    unit_bytes: dict[str, int] = field(default_factory=dict)  # per summary key: the printed unit (exactness)


def read_stats_json(text: str) -> dict[str, int] | None:
    """The counters of a memory_stats() JSON object, or None when the text is not one."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not is_memory_stats(obj):
        return None
    return {k: int(v) for k, v in obj.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def is_memory_stats(obj: dict[str, object]) -> bool:
    """Whether a dict's keys are memory_stats()'s: its byte counters by pool."""
    return "allocated_bytes.all.current" in obj and "reserved_bytes.all.current" in obj


@dataclass
class SummaryReader:
    """Reads memory_summary() tables line by line (a log may hold many, each one moment, and a table may be
    split across the windows a text scan hands over)."""

    current: AllocatorMoment | None = None
    metric: str | None = None
    last_line: int = 0  # the line of a printed dict's last counter
    found: list[AllocatorMoment] = field(default_factory=list)

    def add(self, line: int, text: str, ts: datetime | None = None) -> None:
        """Take one line of a log."""
        if _LITERAL_NEWLINE in text and ("|" in text or "'" in text):
            for piece in text.split(_LITERAL_NEWLINE):
                self._add(line, piece, ts)
        else:
            self._add(line, text, ts)

    def _add(self, line: int, text: str, ts: datetime | None) -> None:
        pairs = _PAIR.findall(text)
        if pairs:
            self._pairs(line, pairs, ts)
            return
        header = _HEADER.search(text)
        if header is not None:
            self._close()
            self.current = AllocatorMoment(line, "memory_summary", int(header[1]), ts)
            return
        if self.current is None:
            return
        counters = _COUNTERS.search(text)
        if counters is not None:
            self.current.stats["num_ooms"], self.current.stats["num_alloc_retries"] = map(int, counters.groups())
            return
        row = _ROW.search(text)
        if row is not None:
            self._row(row[1], row[2])

    def _pairs(self, line: int, pairs: list[tuple[str, str]], ts: datetime | None) -> None:
        """Counters of a printed memory_stats() dict: they continue the dict on the lines just before, and a
        key seen again (the next printout) or a gap of other lines starts a new moment."""
        current = self.current
        continues = (
            current is not None
            and current.origin == "memory_stats"
            and line - self.last_line <= 1
            and not any(key in current.stats for key, _ in pairs)
        )
        if not continues:
            self._close()
            self.current = AllocatorMoment(line, "memory_stats", None, ts)
        assert self.current is not None
        self.current.stats.update({key: int(value) for key, value in pairs})
        self.last_line = line

    def _row(self, label: str, cells_text: str) -> None:
        """One table row: a metric's `all` row, or a pool row of the last metric."""
        assert self.current is not None
        if label in SUMMARY_METRICS:
            self.metric, pool = SUMMARY_METRICS[label], "all"
        elif self.metric is not None:
            pool = _POOLS[label]
        else:
            return
        cells = [c for c in cells_text.split("|")][: len(_COLUMNS)]
        for stat, cell in zip(_COLUMNS, cells, strict=False):
            value = _CELL.match(cell)
            if value is None:
                continue
            shift = _UNITS[value[2]] if value[2] else 0
            key = f"{self.metric}.{pool}.{stat}"
            self.current.stats[key] = int(value[1]) << shift
            self.current.unit_bytes[key] = 1 << shift

    def _close(self) -> None:
        if self.current is not None and self.current.stats and _has_counters(self.current):
            self.found.append(self.current)
        self.current, self.metric = None, None

    def moments(self) -> list[AllocatorMoment]:
        """Every table read, the last one closed."""
        self._close()
        return self.found


@dataclass
class SummaryScanner:
    """Reads the memory_summary() lines of successive windows of one log, as the text-log scan hands them over
    (`scan_text_log(on_window=...)`, `also=[SUMMARY_FINDER]`): only the lines holding a marker are decoded.
    `clock` gives a line its timestamp (None when it has none)."""

    clock: Callable[[str], datetime | None]
    reader: SummaryReader = field(default_factory=SummaryReader)

    def window(self, window: Window) -> None:
        for line, text in window.marked_lines(SUMMARY_FINDER):
            self.reader.add(line, text, self.clock(text))

    def moments(self) -> list[AllocatorMoment]:
        return self.reader.moments()


def _has_counters(moment: AllocatorMoment) -> bool:
    """Whether a moment holds a counter: any of a printout's; for a dict, one of its pool counters (a stray
    `'num_ooms': 1` alone is not a memory_stats() printout, while a summary cut after its header still says how
    many OOMs and retries the process had)."""
    if moment.origin == "memory_summary":
        return bool(moment.stats)
    return any(_STAT_KEY.match(key) for key in moment.stats)


def read_summaries(text: str) -> list[AllocatorMoment]:
    """Every memory_summary() table in a text."""
    reader = SummaryReader()
    for number, line in enumerate(text.splitlines(), start=1):
        reader.add(number, line)
    return reader.moments()


# One row per moment and pool: the columns of allocator_stats, from the memory_stats() keys.
_ROW_COLUMNS: dict[str, tuple[str, str]] = {
    "allocated_bytes": ("allocated_bytes", "current"),
    "allocated_peak_bytes": ("allocated_bytes", "peak"),
    "allocated_total_bytes": ("allocated_bytes", "allocated"),
    "freed_total_bytes": ("allocated_bytes", "freed"),
    "reserved_bytes": ("reserved_bytes", "current"),
    "reserved_peak_bytes": ("reserved_bytes", "peak"),
    "active_bytes": ("active_bytes", "current"),
    "active_peak_bytes": ("active_bytes", "peak"),
    "inactive_split_bytes": ("inactive_split_bytes", "current"),
    # memory_summary() prints inactive_split_bytes as `Non-releasable memory`: the same counter
    "non_releasable_bytes": ("inactive_split_bytes", "current"),
    "requested_bytes": ("requested_bytes", "current"),
    "allocations": ("allocation", "current"),
    "allocations_total": ("allocation", "allocated"),
    "segments": ("segment", "current"),
}
ROW_COLUMNS: tuple[str, ...] = (
    "pool",
    *_ROW_COLUMNS,
    "num_ooms",
    "num_alloc_retries",
    "exact_to_bytes",
)


def moment_rows(moment: AllocatorMoment) -> Iterator[dict[str, object]]:
    """The allocator_stats rows of one moment: `all`, `large`, `small` (pools it printed anything for)."""
    for pool, name in POOL_NAMES.items():
        values: dict[str, object] = {
            column: moment.stats.get(f"{metric}.{pool}.{stat}") for column, (metric, stat) in _ROW_COLUMNS.items()
        }
        top = {k: (moment.stats.get(k) if pool == "all" else None) for k in _TOP_LEVEL}
        if all(v is None for v in values.values()) and all(v is None for v in top.values()):
            continue
        units = [moment.unit_bytes.get(f"{metric}.{pool}.{stat}", 1) for metric, stat in _ROW_COLUMNS.values()]
        yield {"pool": name, **values, **top, "exact_to_bytes": max(units)}


def stats_keys(obj: dict[str, object]) -> set[str]:
    """The memory_stats() counters a dict holds (for tests and detection)."""
    return {k for k in obj if _STAT_KEY.match(k) or k in _TOP_LEVEL}
