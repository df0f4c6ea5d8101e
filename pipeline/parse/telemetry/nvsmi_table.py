"""The table plain `nvidia-smi` prints, every driver era since the 3xx ones: GPUs, MIG devices and processes.

    Tue Jul 14 09:00:43 2026                                  <- the host's clock: the sample's time
    +-----------------------------------------------------------------------------------------+
    | NVIDIA-SMI 590.48.01              Driver Version: 590.48.01      CUDA Version: 13.1     |
    ...
    |=========================================+========================+======================|
    |   0  NVIDIA H100 80GB HBM3          On  |   00000000:00:09.0 Off |                   On |
    | N/A   52C    P0            432W /  700W |   11125MiB /  81559MiB |     N/A      Default |
    |                                         |                        |              Enabled |  <- MIG M. (since 450)
    ...
    | MIG devices:                        (GPU, GI ID, CI ID, MIG Dev | memory used / total | ...)
    |  0    2   0   0  |           11091MiB / 40448MiB    | 60      0 |  3   0    3    0    3 |
    ...
    | Processes:                          (GPU, GI ID, CI ID since 450; before: GPU, PID, Type, name, memory)
    |    0    2    0            21180      C   /root/tools/memhog                     2296MiB |

A GPU is two lines (a third, MIG M., is skipped): index, name and Persistence-M (or Windows' Driver-Model),
bus id, then fan, temperature, performance state, power use / cap, memory used / total and GPU-Util. Each MIG
device becomes a row of its GPU with `mig_instance_id` (its GI ID). Values the driver does not have (`N/A`)
are NULL; names nvidia-smi cut short end in `...` and are kept as printed. The date line above the table is
the host's local time (read in --tz); a table without one has no time of its own. Several tables in one file
(`watch`, a loop) are read one after another. Rows cut off by whoever pasted the table are simply absent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

from ...records import Reject
from .values import (
    GPU_SAMPLES,
    PROCESS_SAMPLES,
    RAW_LIMIT,
    TelemetryRow,
    bus_id,
    clock_time,
    memory_bytes,
    mostly_report,
    name_or_none,
    no_value,
    numeric,
)

NVSMI_TABLE = "nvsmi_table"
TABLE_HEADER = re.compile(r"^\|\s*NVIDIA-SMI\s+\S+")
_BORDER = re.compile(r"^[+|][-=+|]+$")
_GPU_FIRST = re.compile(r"^\s*(\d+)\s+(.+?)\s+(\S+)\s*$")  # index, name, Persistence-M or Driver-Model
_GPU_SECOND = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*/\s*(\S+)\s*$")  # fan, temp, perf, power / cap
_AMOUNT = r"(?:[\d.]+\s*[A-Za-z]*|N/A)"
_USED_TOTAL = re.compile(rf"^\s*({_AMOUNT})\s*/\s*({_AMOUNT})\s*$")
_MIG_DEVICE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")  # GPU, GI ID, CI ID, MIG Dev
_TYPE = r"[A-Z]+(?:\+[A-Z]+)*"
_PROCESS = re.compile(rf"^\|\s*(\d+)\s+(\d+|N/A)\s+(\d+|N/A)\s+(\d+)\s+({_TYPE})\s+(.*?)\s+(\S+)\s*\|$")
_PROCESS_PRE_MIG = re.compile(rf"^\|\s*(\d+)\s+(\d+)\s+({_TYPE})\s+(.*?)\s+(\S+)\s*\|$")
# Section titles, and the section their rows (after the `|===|` line) belong to.
_TITLES = (
    (re.compile(r"^\|\s*GPU\s+Name\b"), "gpus"),
    (re.compile(r"^\|\s*MIG devices", re.IGNORECASE), "mig"),
    (re.compile(r"^\|\s*Processes\b"), "processes"),
)


def looks_like_nvsmi_table(text: str) -> bool:
    """Whether a file is nvidia-smi tables: its `| NVIDIA-SMI x.y` line within the first four non-blank
    lines, with only the command that printed it, the date line and a border before it, and hardly a line
    that is neither a table's nor a date line after it."""
    lines = text.splitlines()
    first = [line.strip() for line in lines[:10] if line.strip()][:4]
    for number, line in enumerate(first):
        if TABLE_HEADER.match(line):
            if not all(_may_precede(before) for before in first[:number]):
                return False
            return mostly_report(lines[:-1], table_line)  # the last line of the head may be cut short
    return False


# The command that printed the table, as a pasted terminal shows it (`# nvidia-smi`, `$ nvidia-smi -i 0`,
# `user@host:~$ watch nvidia-smi`).
_COMMAND = re.compile(r"nvidia-smi(?:\s+[-\w=,.:/]+)*\s*$")


def _may_precede(line: str) -> bool:
    """What may come before the table's header: its date line, a border, or the command that printed it."""
    return bool(clock_time(line, None) or _BORDER.match(line) or _COMMAND.search(line))


def table_line(line: str) -> bool:
    """A line of the table (a border or a row), or its date line."""
    stripped = line.strip()
    return stripped.startswith(("|", "+")) or clock_time(stripped, None) is not None


def read_nvsmi_table(lines: Iterable[str], zone: tzinfo | None) -> Iterator[TelemetryRow | Reject]:
    """Every GPU, MIG device and process row of the tables in `lines`, or a Reject naming a row not read."""
    reader = _TableReader(zone)
    for number, line in enumerate(lines, start=1):
        yield from reader.take(number, line.rstrip("\r\n"))


@dataclass
class _TableReader:
    """Reads one line at a time: which section it is in, and the first line of the GPU being read."""

    zone: tzinfo | None
    ts: datetime | None = None
    clock: datetime | None = None  # the date line just read: the time of the table that follows
    title: str | None = None  # the section whose column titles are being read
    section: str | None = None  # the section whose rows are being read
    gpu: dict[str, object] = field(default_factory=dict)  # a GPU whose first line was read

    def take(self, number: int, line: str) -> Iterator[TelemetryRow | Reject]:
        """The rows one line completes: a date line or a table's header starts a table, a section title and
        its `|===|` line a section, a blank line or other text ends it."""
        stripped = line.strip()
        moment = clock_time(stripped, self.zone)
        if moment is not None:
            self.clock, self.section, self.title = moment, None, None
            return
        if TABLE_HEADER.match(stripped):
            self.ts, self.clock, self.section, self.title = self.clock, None, None, None
            return
        if not stripped.startswith(("|", "+")):
            self.section, self.title, self.gpu = None, None, {}
            return
        title = next((name for pattern, name in _TITLES if pattern.match(stripped)), None)
        if title is not None:
            self.title, self.section = title, None
        elif stripped.startswith("|=") and self.title is not None:
            self.section, self.title = self.title, None
        elif self.section is not None and stripped.startswith("|"):
            yield from self._row(number, stripped)

    def _row(self, number: int, line: str) -> Iterator[TelemetryRow | Reject]:
        try:
            if self.section == "gpus":
                yield from self._gpu_line(number, line)
            elif self.section == "mig":
                yield from self._mig_line(number, line)
            else:
                yield from self._process_line(number, line)
        except ValueError as exc:
            yield Reject(number, f"nvidia-smi table: {exc}", line[:RAW_LIMIT])

    def _gpu_line(self, number: int, line: str) -> Iterator[TelemetryRow]:
        """A GPU's first line starts its row; its second completes it; the MIG M. line is skipped."""
        cells = _cells(line)
        first = _GPU_FIRST.match(cells[0])
        if first is not None and len(cells) >= 2:
            self.gpu = {"line": number, "ts": self.ts, "gpu_index": int(first[1]), "gpu_name": name_or_none(first[2])}
            self.gpu["gpu_bus_id"] = bus_id((cells[1].split() or [""])[0])
            return
        second = _GPU_SECOND.match(cells[0])
        if not self.gpu or second is None or len(cells) < 3:
            return  # the MIG M. line, or a GPU whose first line was cut off
        gpu, self.gpu = self.gpu, {}
        gpu["temperature"] = numeric(second[2])
        gpu["power_w"] = numeric(second[4])
        gpu["memory_used_bytes"], gpu["memory_total_bytes"] = _used_total(cells[1])
        gpu["utilization_gpu"] = numeric((cells[2].split() or ["N/A"])[0])
        yield TelemetryRow(GPU_SAMPLES, gpu)

    def _mig_line(self, number: int, line: str) -> Iterator[TelemetryRow]:
        """A MIG device's first line (its second holds BAR1, not the framebuffer)."""
        cells = _cells(line)
        device = _MIG_DEVICE.match(cells[0])
        if device is None or len(cells) < 2:
            return
        used, total = _used_total(cells[1])
        row = {"line": number, "ts": self.ts, "gpu_index": int(device[1]), "mig_instance_id": int(device[2])}
        yield TelemetryRow(GPU_SAMPLES, {**row, "memory_used_bytes": used, "memory_total_bytes": total})

    def _process_line(self, number: int, line: str) -> Iterator[TelemetryRow | Reject]:
        if "no running processes found" in line.lower():
            return
        row: dict[str, object] = {"line": number, "ts": self.ts}
        if match := _PROCESS.match(line):
            gpu, instance, _, pid, _, name, memory = match.groups()
            row["mig_instance_id"] = int(instance) if instance.isdigit() else None
        elif match := _PROCESS_PRE_MIG.match(line):
            gpu, pid, _, name, memory = match.groups()
        else:
            yield Reject(number, "nvidia-smi table: a Processes row without GPU, PID, type, name and memory", line)
            return
        row |= {"gpu_index": int(gpu), "pid": int(pid), "process_name": name_or_none(name)}
        yield TelemetryRow(PROCESS_SAMPLES, {**row, "used_bytes": memory_bytes(memory)})


def _cells(line: str) -> list[str]:
    """The cells between the `|` of a table line."""
    return line.strip().strip("|").split("|")


def _used_total(cell: str) -> tuple[int | None, int | None]:
    """`11125MiB /  81559MiB` as bytes; a cell that says `N/A` (memory of a MIG-enabled card) has neither."""
    if no_value(cell):
        return None, None
    match = _USED_TOTAL.match(cell)
    if match is None:
        raise ValueError(f"Memory-Usage {cell.strip()!r} is not `used / total`")
    return memory_bytes(match[1]), memory_bytes(match[2])
