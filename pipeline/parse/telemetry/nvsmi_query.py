"""`nvidia-smi -q` (and `-q -d MEMORY,UTILIZATION,...`): the long report, one `key : value` a line.

    ==============NVSMI LOG==============
    Timestamp                                 : Fri Jun 30 17:20:02 2023       <- the host's clock
    Attached GPUs                             : 8
    GPU 00000000:18:00.0                                                        <- one section per GPU
        Product Name                          : NVIDIA H800
        FB Memory Usage
            Total                             : 81559 MiB
        ...
        Processes
            GPU instance ID                   : N/A                             <- before its Process ID
            Process ID                        : 11327
                Name                          : /root/tools/memhog
                Used GPU Memory               : 2566 MiB

Sections nest by indentation, so a key is read by the titles above it: `Used` under `FB Memory Usage` is the
card's memory (not BAR1's, nor the Conf Compute block's), `Power Draw` under `Power Readings` (`GPU Power
Readings` since 530; `Instantaneous` / `Average Power Draw` since 570) is the card's. The report prints no GPU
index: a GPU's position is its index when the report lists every attached GPU (no `-i`). A MIG-enabled card
lists its instances (`MIG Device`, in a `MIG Devices` section before 550), each a row with `mig_instance_id`
and its `(Shared) FB Memory Usage`. Values the driver does not have
(`N/A`, `Not available in WDDM driver model`) are NULL. `-l` repeats the whole report: each is read alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
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
    integer,
    memory_bytes,
    mostly_report,
    no_value,
    numeric,
)

NVSMI_QUERY = "nvsmi_query"
_LOG = re.compile(r"^=+\s*NVSMI LOG\s*=+$")
_KEY_VALUE = re.compile(r"^(\s*)(\S.*?)\s+:\s?(.*?)\s*$")
_TITLE = re.compile(r"^(\s*)(\S.*?)\s*$")
_GPU = re.compile(r"^GPU\s+(\S+)$", re.IGNORECASE)
# A GPU's section title as -q writes it: its PCI bus id, domain:bus:device.function
_SECTION = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")

# (section path below the GPU, key) -> (column, how to read it); the first of several keys for one column wins.
_GPU_KEYS: dict[tuple[tuple[str, ...], str], tuple[str, str]] = {
    ((), "product name"): ("gpu_name", "text"),
    ((), "gpu uuid"): ("gpu_uuid", "text"),
    (("pci",), "bus id"): ("gpu_bus_id", "bus"),
    (("fb memory usage",), "total"): ("memory_total_bytes", "bytes"),
    (("fb memory usage",), "used"): ("memory_used_bytes", "bytes"),
    (("fb memory usage",), "free"): ("memory_free_bytes", "bytes"),
    (("fb memory usage",), "reserved"): ("memory_reserved_bytes", "bytes"),
    (("utilization",), "gpu"): ("utilization_gpu", "number"),
    (("utilization",), "memory"): ("utilization_memory", "number"),
    (("temperature",), "gpu current temp"): ("temperature", "number"),
    (("temperature",), "gpu"): ("temperature", "number"),  # drivers before 3xx: `Gpu : 49 C`
    **{
        ((section,), key): ("power_w", "number")
        for section in ("power readings", "gpu power readings")
        for key in ("power draw", "instantaneous power draw", "average power draw")
    },
}
_MIG_KEYS: dict[tuple[tuple[str, ...], str], tuple[str, str]] = {
    ((), "gpu instance id"): ("mig_instance_id", "int"),
    **{
        ((section,), key): (f"memory_{key}_bytes", "bytes")
        for section in ("fb memory usage", "shared fb memory usage")  # `Shared ...` since 550
        for key in ("total", "used", "free", "reserved")
    },
}
_PROCESS_KEYS: dict[str, tuple[str, str]] = {
    "process id": ("pid", "int"),
    "name": ("process_name", "text"),
    "used gpu memory": ("used_bytes", "bytes"),
    "gpu instance id": ("mig_instance_id", "int"),
}
_MIG_DEVICE, _PROCESSES = "mig device", "processes"
# Where a MIG device's section stands below its GPU: in a `MIG Devices` section (drivers 450 to 535), or right
# under the GPU (550 on).
_MIG_PARENTS = ((), ("mig devices",))


def starts_query(line: str) -> bool:
    """The `==============NVSMI LOG==============` line a -q report starts with."""
    return _LOG.match(line.strip()) is not None


def starts_query_block(lines: Sequence[str]) -> bool:
    """A -q report's banner, or one GPU's section pasted without it (a trimmed report): `GPU 00000000:DD:00.0`, the
    title -q gives each GPU (its PCI bus id), over an indented line of its section (`    Product Name : ...`,
    or `    FB Memory Usage` under `-d MEMORY`)."""
    if starts_query(lines[0]):
        return True
    below = next((line for line in lines[1:] if line.strip()), "")
    return _SECTION.match(lines[0].rstrip()) is not None and below[:1].isspace()


def looks_like_nvsmi_query(text: str) -> bool:
    """Whether a file is `nvidia-smi -q` reports: it starts with the `==============NVSMI LOG==============`
    line, or a GPU's section without it, and hardly a line after it is outside the report (a report's lines are
    indented, or are its top-level keys, GPU titles and banners)."""
    lines = text.splitlines()
    first = [line for line in lines[:10] if line.strip()]
    return bool(first) and starts_query_block(first) and mostly_report(lines[:-1], report_line)


def report_line(line: str) -> bool:
    """A line of a -q report: indented, or a banner, top-level key or GPU title."""
    stripped = line.strip()
    return line[:1].isspace() or bool(_LOG.match(stripped) or _KEY_VALUE.match(line) or _GPU.match(stripped))


def read_nvsmi_query(lines: Iterable[str], zone: tzinfo | None) -> Iterator[TelemetryRow | Reject]:
    """Every GPU, MIG instance and process of the reports in `lines`, or a Reject naming a value not read."""
    report = _Report(zone)
    for number, line in enumerate(lines, start=1):
        text = line.rstrip("\r\n")
        if _LOG.match(text.strip()):
            yield from report.rows()
            report = _Report(zone)
        elif text.strip():
            yield from report.take(number, text)
    yield from report.rows()


@dataclass
class _Gpu:
    """One GPU section: its row, its MIG instances' rows and its processes' rows."""

    row: dict[str, object]
    instances: list[dict[str, object]] = field(default_factory=list)
    processes: list[dict[str, object]] = field(default_factory=list)
    pending_instance: int | None = None  # `GPU instance ID` comes before the `Process ID` it belongs to


@dataclass
class _Report:
    """One `NVSMI LOG`: its time, how many GPUs it says are attached, and the GPUs read so far."""

    zone: tzinfo | None
    ts: datetime | None = None
    attached: int | None = None
    gpus: list[_Gpu] = field(default_factory=list)
    titles: list[tuple[int, str]] = field(default_factory=list)  # (indent, lower-case title) above this line

    def take(self, number: int, line: str) -> Iterator[Reject]:
        """Read one non-blank line (rows come out when the report ends: the GPU count decides their index)."""
        pair = _KEY_VALUE.match(line)
        if pair is None:
            self._title(number, line)
            return
        indent, key, value = len(pair[1]), pair[2].lower(), pair[3]
        self.titles = [t for t in self.titles if t[0] < indent]
        try:
            self._value(number, key, value)
        except ValueError as exc:
            yield Reject(number, f"nvidia-smi -q: {pair[2]}: {exc}", line[:RAW_LIMIT])

    def rows(self) -> Iterator[TelemetryRow]:
        """Each GPU's row, then its MIG instances' and processes' rows, indexed by position when the report
        lists every attached GPU."""
        complete = self.attached == len(self.gpus)
        for position, gpu in enumerate(self.gpus):
            index = position if complete else None
            yield TelemetryRow(GPU_SAMPLES, {**gpu.row, "gpu_index": index})
            for instance in gpu.instances:
                yield TelemetryRow(GPU_SAMPLES, {**instance, "gpu_index": index})
            for process in gpu.processes:
                yield TelemetryRow(PROCESS_SAMPLES, {**process, "gpu_index": index})

    def _title(self, number: int, line: str) -> None:
        match = _TITLE.match(line)
        if match is None:
            return
        indent, title = len(match[1]), match[2]
        self.titles = [t for t in self.titles if t[0] < indent]
        gpu = _GPU.match(title) if indent == 0 else None
        if gpu is not None:
            self.gpus.append(_Gpu({"line": number, "ts": self.ts, "gpu_bus_id": bus_id(gpu[1])}))
        elif self.gpus and title.lower() == _MIG_DEVICE and tuple(t for _, t in self.titles[1:]) in _MIG_PARENTS:
            self.gpus[-1].instances.append({"line": number, "ts": self.ts})
        self.titles.append((indent, title.lower()))

    def _value(self, number: int, key: str, value: str) -> None:
        path = tuple(t for _, t in self.titles)
        if not path:
            self._top(key, value)
            return
        if not self.gpus or not _GPU.match(path[0]):
            return
        gpu, below = self.gpus[-1], path[1:]
        mig = _below_mig_device(below)
        if below[:1] == (_PROCESSES,):
            self._process(gpu, number, key, value)
        elif mig is not None and gpu.instances:
            _fill(gpu.instances[-1], _MIG_KEYS.get((mig, key)), value)
        else:
            _fill(gpu.row, _GPU_KEYS.get((below, key)), value)

    def _top(self, key: str, value: str) -> None:
        if key == "timestamp":
            self.ts = clock_time(value, self.zone)
            if self.ts is None:
                raise ValueError(f"{value!r} is not nvidia-smi's `Tue Jul 14 08:12:53 2026`")
        elif key == "attached gpus":
            self.attached = integer(value)

    def _process(self, gpu: _Gpu, number: int, key: str, value: str) -> None:
        if key == "gpu instance id":
            gpu.pending_instance = integer(value)
        elif key == "process id":
            gpu.processes.append({"line": number, "ts": self.ts, "mig_instance_id": gpu.pending_instance})
            gpu.pending_instance = None
            _fill(gpu.processes[-1], _PROCESS_KEYS[key], value)
        elif gpu.processes and key in _PROCESS_KEYS:
            _fill(gpu.processes[-1], _PROCESS_KEYS[key], value)


def _below_mig_device(below: tuple[str, ...]) -> tuple[str, ...] | None:
    """The sections below a MIG device of a path below a GPU, or None when the path is not in one."""
    for parent in _MIG_PARENTS:
        if below[: len(parent) + 1] == (*parent, _MIG_DEVICE):
            return below[len(parent) + 1 :]
    return None


def _fill(row: dict[str, object], target: tuple[str, str] | None, value: str) -> None:
    """Set one column of a row from its printed value, unless a key read earlier already set it."""
    if target is None or row.get(target[0]) is not None:
        return
    column, kind = target
    if kind == "bytes":
        row[column] = memory_bytes(value)
    elif kind == "number":
        row[column] = numeric(value)
    elif kind == "int":
        row[column] = integer(value)
    elif kind == "bus":
        row[column] = bus_id(value)
    else:
        row[column] = None if no_value(value) else value
