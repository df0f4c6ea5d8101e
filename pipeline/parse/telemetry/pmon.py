"""`nvidia-smi pmon`: one line per process on each GPU and sampling round, under a header naming the columns.

    # gpu        pid  type    fb    sm   mem   enc   dec   command        (`-s um`; `-s u` has no `fb`, drivers
    # Idx          #   C/G    MB     %     %     %     %   name            from 545 add `jpg ofa`, `-o DT`
        0      27013     C  1234    50    20     -     -   python          puts `Date Time` in front)
        1          -     -     -     -     -     -     -   -

A GPU with no process prints a line of `-`: no row. `fb` is the process's framebuffer memory in MB, which
nvidia-smi means as MiB (as in its other reports). The rows go to gpu_process_samples; nothing else of pmon's
is kept (`sm` is SM activity, not a memory figure).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from ...records import Reject
from ...units import to_utc_naive
from .blocks import Block, BlockFormat, numbered
from .values import PROCESS_SAMPLES, RAW_LIMIT, TelemetryRow, integer, memory_bytes, name_or_none

NVSMI_PMON = "nvsmi_pmon"
_DATE = re.compile(r"^\d{8}$")
_TIME = re.compile(r"^\d{2}:\d{2}:\d{2}$")


def pmon_header(lines: Sequence[str]) -> bool:
    """Whether lines[0:2] are pmon's header: `# gpu  pid  type ...` over `# Idx  #  C/G ...`."""
    heads = [line.strip() for line in lines[:2]]
    if len(heads) < 2 or not all(line.startswith("#") for line in heads):
        return False
    names, units = heads[0].lstrip("#").split(), heads[1].lstrip("#").split()
    return {"gpu", "pid", "type"} <= set(names) and "Idx" in units and "C/G" in units


def looks_like_pmon(text: str) -> bool:
    """Whether a file starts with pmon's header (after the command that printed it, if that is there)."""
    lines = [line for line in text.splitlines()[:4] if line.strip()]
    return pmon_header(lines) or (len(lines) > 2 and "pmon" in lines[0] and pmon_header(lines[1:]))


def read_pmon(lines: Iterable[str], zone: tzinfo | None) -> Iterator[TelemetryRow | Reject]:
    """Every process line as a gpu_process_samples row, or a Reject naming a line that does not fit its header."""
    reader = _PmonReader(zone)
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if text.startswith("#"):
            reader.header(text)
        elif text and reader.names:
            row = reader.row(number, text)
            if row is not None:
                yield row


@dataclass
class _PmonReader:
    zone: tzinfo | None
    names: tuple[str, ...] = ()

    def header(self, line: str) -> None:
        """The column names (the units line below them, `# Idx # C/G ...`, is not a header)."""
        names = tuple(line.lstrip("#").split())
        if "gpu" in names and "pid" in names:
            self.names = names

    def row(self, number: int, line: str) -> TelemetryRow | Reject | None:
        """The line's row; None for an idle GPU's line of `-`."""
        values = line.split()
        if len(values) < len(self.names):  # the command may hold spaces: it takes whatever is left
            return Reject(number, f"expected {len(self.names)} columns as the header names, found {len(values)}", line)
        by_name = dict(zip(self.names[:-1], values, strict=False))
        by_name[self.names[-1]] = " ".join(values[len(self.names) - 1 :])
        if by_name.get("pid") == "-":
            return None
        try:
            out: dict[str, object] = {
                "line": number,
                "ts": self._time(by_name),
                "gpu_index": integer(by_name["gpu"]),
                "pid": integer(by_name["pid"]),
                "process_name": name_or_none(by_name.get("command", "")),
            }
            if "fb" in by_name:
                out["used_bytes"] = None if by_name["fb"] == "-" else memory_bytes(by_name["fb"])
        except ValueError as exc:
            return Reject(number, str(exc), line[:RAW_LIMIT])
        return TelemetryRow(PROCESS_SAMPLES, out)

    def _time(self, by_name: dict[str, str]) -> datetime | None:
        """`-o DT`: `20240312 10:20:30`, the host's clock; `-o T` alone gives no date, so no time."""
        date, time = by_name.get("Date", ""), by_name.get("Time", "")
        if not (_DATE.match(date) and _TIME.match(time)):
            return None
        return to_utc_naive(datetime.strptime(f"{date} {time}", "%Y%m%d %H:%M:%S"), self.zone)


def _continues(line: str) -> bool:
    tokens = line.split()
    return bool(tokens) and (line.lstrip().startswith("#") or tokens[0].isdigit())


def _read_block(block: Block, zone: tzinfo | None, at: datetime | None) -> tuple[list[TelemetryRow], list[Reject]]:
    return numbered(block, read_pmon(block.lines, zone))


# its header, or the command above a header that names no `gpu` first (`-o DT`: `#Date Time gpu pid`)
PMON_BLOCK = BlockFormat(lambda lines, _: pmon_header(lines), _continues, _read_block, (b"# gpu", b"#gpu", b"pmon"))
