"""rocm-smi, AMD's nvidia-smi: what it states per GPU, between its `ROCm System Management Interface` banner
and `End of ROCm SMI Log`.

    ============================= Memory Usage (Bytes) =============================   (--showmeminfo vram)
    GPU[0]          : VRAM Total Memory (B): 4278190080
    GPU[0]          : VRAM Total Used Memory (B): 108814336

    GPU  Temp   AvgPwr  SCLK    MCLK    Fan    Perf  PwrCap  VRAM%  GPU%                (the concise table)
    1    25.0c  10.0W   852Mhz  167Mhz  14.9%  auto  170.0W  N/A    0%

`GPU[N] : key (unit): value` lines of one run make one row per GPU (its line: the GPU's first). The concise
table's values stand under their titles (rocm 5 and later print titles of two lines and values with spaces,
so a value is the text between its title's column and the next title's; the 2018 layout indents titles and
values alike: ` GPU  Temp    AvgPwr` over `  0   35c     73.68W`). VRAM% is a share without the
card's size: not kept. rocm-smi prints no time: its rows have none of their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ...records import Reject
from .values import GPU_SAMPLES, RAW_LIMIT, TelemetryRow, integer, memory_bytes, numeric

ROCM_SMI = "rocm_smi"
_BANNER = "ROCm System Management Interface"
_END = "End of ROCm SMI Log"
_KEYED = re.compile(r"^GPU\[(\d+)\]\s*:\s*(.+?)\s*\(([^()]*)\)\s*:\s*(.*?)\s*$")
# `key (unit)` of the keyed lines -> column (lower case, as rocm-smi's versions capitalise differently).
_KEYS: dict[str, str] = {
    "vram total memory": "memory_total_bytes",
    "vram total used memory": "memory_used_bytes",
    "gpu use": "utilization_gpu",
    "temperature (sensor edge)": "temperature",
    "average graphics package power": "power_w",
    "current socket graphics package power": "power_w",
}
# Titles of the concise table -> column.
_TITLES: dict[str, str] = {
    "GPU": "gpu_index",
    "Device": "gpu_index",
    "Temp": "temperature",
    "AvgPwr": "power_w",
    "Power": "power_w",
    "GPU%": "utilization_gpu",
}


def rocm_end(line: str) -> bool:
    """rocm-smi's last line."""
    return _END in line


def looks_like_rocm_smi(text: str) -> bool:
    """Whether the file starts with rocm-smi's banner."""
    lines = [line for line in text.splitlines()[:3] if line.strip()]
    return bool(lines) and _BANNER in lines[0]


def read_rocm_smi(lines: Iterable[str]) -> Iterator[TelemetryRow | Reject]:
    """Every GPU of every rocm-smi run in `lines` as a row, or a Reject naming a value not read."""
    run = _Run()
    for number, line in enumerate(lines, start=1):
        text = line.rstrip("\r\n")
        if _BANNER in text or _END in text:
            yield from run.rows()
            run = _Run()
        elif text.strip() and not text.strip().startswith("="):
            yield from run.take(number, text)
    yield from run.rows()


@dataclass
class _Run:
    """One rocm-smi run: the keyed values per GPU, and the concise table's titles when it has one."""

    gpus: dict[int, dict[str, object]] = field(default_factory=dict)
    titles: list[tuple[int, str]] = field(default_factory=list)  # (column where the title starts, title)
    table: list[TelemetryRow] = field(default_factory=list)

    def take(self, number: int, line: str) -> Iterator[Reject]:
        keyed = _KEYED.match(line.strip())
        try:
            if keyed is not None:
                self._keyed(number, keyed)
            elif self.titles and self._gpu_row(line):
                self._table_row(number, line)
            elif any(title in _TITLES for title in line.split()) and "Temp" in line.split():
                self.titles = [(m.start(), m[0]) for m in re.finditer(r"\S+", line)]
        except ValueError as exc:
            yield Reject(number, f"rocm-smi: {exc}", line[:RAW_LIMIT])

    def rows(self) -> Iterator[TelemetryRow]:
        yield from (TelemetryRow(GPU_SAMPLES, row) for row in self.gpus.values())
        yield from self.table

    def _keyed(self, number: int, match: re.Match[str]) -> None:
        index, key, unit, value = int(match[1]), match[2].lower(), match[3], match[4]
        column = _KEYS.get(key)
        row = self.gpus.setdefault(index, {"line": number, "ts": None, "gpu_index": index})
        if column is None or row.get(column) is not None:
            return
        row[column] = memory_bytes(value, unit) if column.endswith("_bytes") else numeric(value)

    def _gpu_row(self, line: str) -> bool:
        """A row of the concise table holds a GPU's index under the `GPU` (or `Device`) title, wherever the table
        stands: at the line's start (rocm 5 and later), indented as its titles are (the 2018 layout, case
        pasted_tables/029), after a job log's `host out: ` (case 028)."""
        return any(_TITLES.get(title) == "gpu_index" and value.isdigit() for title, value in self._cells(line))

    def _cells(self, line: str) -> Iterator[tuple[str, str]]:
        """(title, value) of each column: a value stands from its title's column to the next title's."""
        ends = [start for start, _ in self.titles[1:]] + [len(line)]
        for (start, title), end in zip(self.titles, ends, strict=True):
            yield title, line[start:end].strip()

    def _table_row(self, number: int, line: str) -> None:
        row: dict[str, object] = {"line": number, "ts": None}
        for title, value in self._cells(line):
            column = _TITLES.get(title)
            if column is not None and row.get(column) is None:
                row[column] = integer(value) if column == "gpu_index" else numeric(value)
        if row.get("gpu_index") is not None:
            self.table.append(TelemetryRow(GPU_SAMPLES, row))
