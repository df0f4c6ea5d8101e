"""`nvidia-smi dmon` and `dcgmi dmon`: a header naming columns, then one whitespace-separated line per GPU and
sampling round.

    # gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk          (nvidia-smi dmon; `-o DT` adds
    # Idx     W     C     C     %     %     %     %   MHz   MHz           `Date Time` in front, `-s m`
        0    123     44     50      5      0      0      0   2619   1980   gives `fb` in MB)

    #Entity   FBUSD        GPUTL        TMPTR        POWER              (dcgmi dmon -e 252,203,150,155:
    ID                                                                   DCGM's short field tags)
    GPU 0     1034         12           41           71.304

nvidia-smi dmon repeats its header now and then; `-` is its no-value, `N/A` dcgmi's. Only the columns
below are kept: `sm` is SM activity, not `utilization.gpu`, and is left out. Neither tool prints the date
unless asked (`-o DT`): such rows have no time of their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, tzinfo

from ...records import Reject
from ...units import to_utc_naive
from .values import GPU_SAMPLES, RAW_LIMIT, TelemetryRow, integer, memory_bytes, numeric

NVSMI_DMON, DCGMI_DMON = "nvsmi_dmon", "dcgmi_dmon"

# nvidia-smi dmon columns oomlab keeps -> (column, how to read).
_NVSMI_COLUMNS: dict[str, tuple[str, str]] = {
    "gpu": ("gpu_index", "int"),
    "pwr": ("power_w", "number"),
    "gtemp": ("temperature", "number"),
    "temp": ("temperature", "number"),  # the GPU's temperature before drivers split it into gtemp and mtemp
    "mem": ("utilization_memory", "number"),
    "fb": ("memory_used_bytes", "bytes"),
}
# dcgmi dmon field tags (DCGM's dcgm_fields: FB_USED is FBUSD, ...), all framebuffer amounts in MiB.
_DCGMI_COLUMNS: dict[str, tuple[str, str]] = {
    "FBUSD": ("memory_used_bytes", "bytes"),
    "FBFRE": ("memory_free_bytes", "bytes"),
    "FBTTL": ("memory_total_bytes", "bytes"),
    "FBRSV": ("memory_reserved_bytes", "bytes"),
    "GPUTL": ("utilization_gpu", "number"),
    "MCUTL": ("utilization_memory", "number"),
    "TMPTR": ("temperature", "number"),
    "POWER": ("power_w", "number"),
}
_DATE = re.compile(r"^\d{8}$")
_TIME = re.compile(r"^\d{2}:\d{2}:\d{2}$")


def dmon_kind(text: str) -> str | None:
    """NVSMI_DMON for a file starting with `# gpu ...` over `# Idx ...`, DCGMI_DMON for `#Entity ...` over
    `ID`, else None."""
    lines = [line.strip() for line in text.splitlines()[:5] if line.strip()]
    if len(lines) < 2 or not lines[0].startswith("#"):
        return None
    names = lines[0].lstrip("#").split()
    if names[:1] == ["#"]:  # `# # gpu ...`: a dmon table commented out, read once its comment marks are off
        return None
    if "gpu" in names and lines[1].startswith("#") and "Idx" in lines[1].lstrip("#").split():
        return NVSMI_DMON
    # `ID` below (or `ID  W  C`, with the units), or, where the poster cut that line, the first GPU's row
    if names[:1] == ["Entity"] and lines[1].split()[:1] in (["ID"], ["GPU"]):
        return DCGMI_DMON
    return None


def read_dmon(lines: Iterable[str], kind: str, zone: tzinfo | None) -> Iterator[TelemetryRow | Reject]:
    """Every sample line as a gpu_samples row, or a Reject naming a line that does not fit its header."""
    reader = _DmonReader(kind, zone)
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if text.startswith("#"):
            reader.header(text)
        elif text and text.split()[0] != "ID":  # dcgmi's units row: `ID`, or `ID   W   C` under the names
            row = reader.row(number, text)
            if row is not None:
                yield row


@dataclass
class _DmonReader:
    kind: str
    zone: tzinfo | None
    names: tuple[str, ...] = ()

    def header(self, line: str) -> None:
        """The column names (the units line below them, `# Idx W C ...`, is not a header)."""
        names = tuple(line.lstrip("#").split())
        if self.kind == DCGMI_DMON and names[:1] == ("Entity",):
            self.names = ("Entity", "EntityId", *names[1:])  # `GPU 0`: the entity is two words
        elif self.kind == NVSMI_DMON and "gpu" in names:
            self.names = names

    def row(self, number: int, line: str) -> TelemetryRow | Reject | None:
        """The line's row; None when it states none of the kept values (`N/A` rounds, NVLink-only columns)."""
        values = line.split()
        if not self.names or len(values) != len(self.names):
            return Reject(number, f"expected {len(self.names)} columns as the header names, found {len(values)}", line)
        by_name = dict(zip(self.names, values, strict=True))
        out: dict[str, object] = {"line": number, "ts": self._time(by_name)}
        columns = _NVSMI_COLUMNS if self.kind == NVSMI_DMON else _DCGMI_COLUMNS
        if self.kind == DCGMI_DMON:
            if by_name["Entity"] != "GPU":
                return Reject(number, f"{by_name['Entity']} {by_name['EntityId']}: not a GPU", line[:RAW_LIMIT])
            by_name["gpu"], columns = by_name["EntityId"], {**columns, "gpu": ("gpu_index", "int")}
        try:
            for name, (column, how) in columns.items():
                if name in by_name:
                    out[column] = _read(by_name[name], how)
        except ValueError as exc:
            return Reject(number, f"{name}: {exc}", line[:RAW_LIMIT])
        if all(out.get(column) is None for column, _ in columns.values() if column != "gpu_index"):
            return None
        return TelemetryRow(GPU_SAMPLES, out)

    def _time(self, by_name: dict[str, str]) -> datetime | None:
        """`-o DT`: `20240312 10:20:30`, the host's clock."""
        date, time = by_name.get("Date", ""), by_name.get("Time", "")
        if not (_DATE.match(date) and _TIME.match(time)):
            return None
        moment = datetime.strptime(f"{date} {time}", "%Y%m%d %H:%M:%S")
        return to_utc_naive(moment, self.zone)


def _read(value: str, how: str) -> object:
    if value == "-":
        return None
    if how == "int":
        return integer(value)
    return memory_bytes(value) if how == "bytes" else numeric(value)
