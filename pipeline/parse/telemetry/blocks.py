"""GPU telemetry printed inside other text: a report pasted into a ticket, a runbook, a chat thread or a shell
session, rather than a file of its own.

What wraps it is taken off line by line (`WRAPPERS`): a Markdown fence or an indented block, a quoted reply
(`> `), a commented-out paste (`# `, `// `). A shell prompt line above a block (`$ `, `# `,
`user@host:~$ `) is the command that printed it; where the block has no header of its own, the fields that
command queried are its header (`--query-gpu=name,memory.used --format=csv,noheader`). Each block is read by
its format's block reader (`block` of its entry in parse/formats.py), and every row keeps its line number in the
file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Protocol

from ...records import Reject
from .dmon import NVSMI_DMON, dmon_kind, read_dmon
from .nvsmi import NVSMI_APPS, NVSMI_GPU, header_fields, headerless_kind, nvsmi_kind, read_nvsmi_lines, telemetry_rows
from .nvsmi_query import read_nvsmi_query, report_line, starts_query_block
from .nvsmi_table import TABLE_HEADER, read_nvsmi_table, table_line
from .prom import exposition_line, read_samples, starts_exposition
from .rocm import looks_like_rocm_smi, read_rocm_smi, rocm_end
from .scrape import ENGINE_SAMPLES, Scrape
from .series import json_line, starts_api_block, starts_export_block, text_series
from .values import GPU_SAMPLES, RAW_LIMIT, TelemetryRow, clock_time

# What may stand before each line of a pasted block, tried in this order: a quoted reply's `>` marks (no report
# starts with one), nothing (beyond indentation), a comment's `#` or `//` (after nothing: dmon's header and
# Prometheus' `# HELP` start with `#` themselves). A block keeps the wrapper its first line has.
WRAPPERS: tuple[re.Pattern[str], ...] = (
    re.compile(r"^\s*(?:>\s?)+\s*"),
    re.compile(r"^\s*"),
    re.compile(r"^\s*(?:#|//)\s?"),
)
# A shell prompt before a command: `$ `, `# ` (root), `user@host:~$ `, `(venv) $ `, `PS C:\> `, `>>> ` is no shell.
_PROMPT = re.compile(r"^\s*(?:\([^)]*\)\s*)?(?:[\w.-]+@[\w.-]+(?::[^$#\s]*)?\s*)?[$#%>]\s+(?=\S)")
_TOOLS = ("nvidia-smi", "dcgmi", "rocm-smi")
_QUERY = re.compile(r"--query-(gpu|compute-apps)[= ]([\w.,]+)")
# Markdown's backslash before a mark it would read (`\\# gpu` for a dmon header in a paste).
_ESCAPED = re.compile(r"^(\s*)\\([#*_>|-])")
# A line standing for rows the poster left out: `[...]`, `...`, `…`, `[snip]`.
_ELISION = re.compile(r"^\s*(?:\[\s*(?:\.{2,}|…|snip(?:ped)?)\s*\]|\.{3,}|…)\s*$", re.IGNORECASE)
_PROCESSES_TITLE = re.compile(r"^\|\s*Processes:")
_FIELD_NAME = re.compile(r"^[\w.]+$")
_FENCE = re.compile(r"^\s*(?:>\s?)*\s*(```|~~~)")
# A poster's note after a pasted CSV row: an arrow or a comment mark after two spaces or more (nvidia-smi separates
# values by `, ` and pads none, so a run of spaces never stands inside a row it printed).
_NOTE = re.compile(r"\s{2,}(?:←|⟵|<-+|#|//)(?:\s.*)?$")
# The one value of a single-field query's row: `13284 MiB`, `85 %`, `54.11 W`, `[N/A]`.
_ONE_AMOUNT = re.compile(r"^(?:\d+(?:\.\d+)?\s*(?:MiB|%|W|MHz|C)?|\[[^\]]+\])$")
# How many lines above a block may hold the command that printed it (a blank line, a fence between).
COMMAND_REACH = 3
# A blank line inside a report (nvidia-smi's table between its GPUs and its processes, -q between GPUs): the
# block goes on when the next line is the report's again.
_BLANKS_INSIDE = 1


@dataclass(frozen=True)
class Block:
    """The lines of one pasted block, unwrapped, numbered from `first` as in the file; `command` is the shell
    command printed above it (None when the text shows none)."""

    kind: str
    first: int
    lines: list[str]
    command: str | None


@dataclass(frozen=True)
class Found:
    """What one block yielded: its rows (lines numbered as in the file), its rejects, the origin its GPU rows
    get."""

    kind: str
    origin: str
    rows: list[TelemetryRow]
    rejects: list[Reject]


@dataclass(frozen=True)
class BlockFormat:
    """A format as a block inside text: `starts(lines)` says whether a block of it starts at lines[0] (the
    command above it in hand); `continues(line)` whether an unwrapped line is still part of it; `read` its
    rows."""

    starts: Callable[[Sequence[str], str | None], bool]
    continues: Callable[[str], bool]
    read: Callable[[Block, tzinfo | None, datetime | None], tuple[list[TelemetryRow], list[Reject]]]
    # what a line of the block (or the command above it) holds: the text-log scan decodes only such lines
    markers: tuple[bytes, ...]


class Blocked(Protocol):
    """A format of the registry (parse/formats.py) that is found inside text."""

    @property
    def name(self) -> str: ...
    @property
    def origin(self) -> str | None: ...
    @property
    def block(self) -> BlockFormat | None: ...


def find_blocks(
    lines: Sequence[str],
    formats: Sequence[Blocked],
    first: int = 1,
    zone: tzinfo | None = None,
    at: datetime | None = None,
) -> Iterator[Found]:
    """Every block of one of `formats` in `lines` (the text's lines from number `first` on), read."""
    index = 0
    while index < len(lines):
        found = block_at(lines, index, formats, first)
        if found is None:
            index += 1
            continue
        block, fmt = found
        yield read_block(block, fmt, zone, at)
        index = block.first - first + len(block.lines)


def read_block(block: Block, fmt: Blocked, zone: tzinfo | None, at: datetime | None) -> Found:
    """What a block of `fmt` yields."""
    assert fmt.block is not None
    rows, rejects = fmt.block.read(block, zone, at)
    return Found(block.kind, fmt.origin or "", rows, rejects)


def block_at(
    lines: Sequence[str], index: int, formats: Sequence[Blocked], first: int = 1
) -> tuple[Block, Blocked] | None:
    """The block starting at lines[index] under one of the wrappers, and its format; or None."""
    if _FENCE.match(lines[index]):
        return None
    command = _command_above(lines, index)
    for pattern in WRAPPERS:
        prefix = pattern.match(lines[index])
        if prefix is None:
            continue
        wrapper = _Wrapper(prefix[0])
        head = [wrapper.unwrap(line) or "" for line in lines[index : index + 6]]
        if not head[0].strip():
            continue
        for fmt in formats:
            assert fmt.block is not None
            if fmt.block.starts(head, command):
                return Block(fmt.name, first + index, _extent(lines, index, wrapper, fmt.block), command), fmt
    return None


@dataclass(frozen=True)
class _Wrapper:
    """What stands before a block's first line; the block's other lines carry it too (indentation: at most as
    much; a quote or comment mark: the same, or the mark alone on a blank line)."""

    prefix: str

    def unwrap(self, line: str) -> str | None:
        """The line without the wrapper (and Markdown's escape of its first mark, `\\# gpu`); None when the line
        does not carry the wrapper (it is outside the block)."""
        if line.startswith(self.prefix):
            text = line[len(self.prefix) :]
        elif self.prefix.isspace() or not self.prefix:
            text = line[min(len(self.prefix), len(line) - len(line.lstrip())) :]
        else:
            return "" if line.strip() == self.prefix.strip() else None
        return _ESCAPED.sub(r"\1\2", text, count=1)


def _extent(lines: Sequence[str], index: int, wrapper: _Wrapper, fmt: BlockFormat) -> list[str]:
    """The block's unwrapped lines from lines[index] on: while its format goes on, across a blank line."""
    body = [wrapper.unwrap(lines[index]) or ""]
    blanks = 0
    for line in lines[index + 1 :]:
        text = wrapper.unwrap(line)
        if text is None or _FENCE.match(line):
            break
        if _ELISION.match(text):  # the poster left rows out here: the block goes on after them
            body += [""] * (blanks + 1)
            blanks = 0
            continue
        if not text.strip():
            blanks += 1
            if blanks > _BLANKS_INSIDE:
                break
            continue
        if not fmt.continues(text):
            break
        body += [""] * blanks + [text]
        blanks = 0
    return body


def _command_above(lines: Sequence[str], index: int) -> str | None:
    """The shell command of a GPU tool on a prompt line just above lines[index] (fences and blank lines may stand
    between)."""
    for line in reversed(lines[max(0, index - COMMAND_REACH) : index]):
        if not line.strip() or _FENCE.match(line):
            continue
        for pattern in WRAPPERS:
            prefix = pattern.match(line)
            text = line[prefix.end() :] if prefix else line
            prompt = _PROMPT.match(text)
            if prompt and any(tool in text for tool in _TOOLS):
                return text[prompt.end() :].strip()
        return None
    return None


# -- nvidia-smi query CSV ------------------------------------------------------------------------------------------


def _csv_header(lines: Sequence[str], command: str | None) -> tuple[str, str, bool] | None:
    """(kind, header, whether the header is the block's own first line) of a CSV block at lines[0]. Without a
    header of its own the command above names the fields, in the order it printed them: under `noheader`, or
    where the poster dropped the header line `--format=csv` printed (case pasted_tables/003)."""
    lines = [_without_note(line) for line in lines[:2]]
    kind = nvsmi_kind(lines[0])
    whole = all(_FIELD_NAME.match(f.name) for f in header_fields(lines[0]))  # no wrapper left on the header
    if kind is not None and whole and len(lines) > 1 and lines[1].count(",") == lines[0].count(","):
        return kind, lines[0], True
    query = _QUERY.search(command or "")
    if query is None or kind is not None:
        return None
    names = query[2].split(",")
    if lines[0].count(",") != len(names) - 1:
        return None
    return (NVSMI_APPS if query[1] == "compute-apps" else NVSMI_GPU), ",".join(names), False


def _starts_csv(lines: Sequence[str], command: str | None) -> bool:
    return _csv_header(lines, command) is not None or _headerless_without_command(lines, command)


def _headerless_without_command(lines: Sequence[str], command: str | None) -> bool:
    """Values that can only be nvidia-smi's (`headerless_kind`), with no header and no command to name them."""
    rows = [line for line in lines if line.strip() and "," in line]
    return "," in lines[0] and _QUERY.search(command or "") is None and headerless_kind("\n".join(rows)) is not None


def _csv_continues(line: str) -> bool:
    """A row of values (a query of one field prints no comma: `13284 MiB`), not the next command or a comment."""
    text = _without_note(line)
    return ("," in text or bool(_ONE_AMOUNT.match(text.strip()))) and not text.lstrip().startswith(("#", "$"))


def _without_note(line: str) -> str:
    """A pasted row without the note its poster wrote after the values (`13284 MiB   <- still held`)."""
    return _NOTE.sub("", line)


def _read_csv(block: Block, zone: tzinfo | None, at: datetime | None) -> tuple[list[TelemetryRow], list[Reject]]:
    found = _csv_header(block.lines, block.command)
    if found is None:
        reason = (
            "nvidia-smi CSV without a header, and no command above it to name its fields: which value is which "
            "cannot be told from the values; paste the command (or the header) with it"
        )
        return [], [Reject(block.first, reason, block.lines[0][:RAW_LIMIT])]
    kind, header, own = found
    tz = getattr(zone, "key", None)
    body = [_without_note(line) for line in (block.lines[1:] if own else block.lines)]
    start = block.first + (1 if own else 0)
    return telemetry_rows(read_nvsmi_lines(body, header, kind, tz, start), kind)


# -- the printed reports -------------------------------------------------------------------------------------------


def numbered(block: Block, items: Iterator[TelemetryRow | Reject]) -> tuple[list[TelemetryRow], list[Reject]]:
    """A reader's rows and rejects, their lines counted from the block's first line in the file."""
    rows: list[TelemetryRow] = []
    rejects: list[Reject] = []
    shift = block.first - 1
    for item in items:
        if isinstance(item, Reject):
            rejects.append(Reject(None if item.line is None else item.line + shift, item.reason, item.raw))
        else:
            line = item.row.get("line")
            rows.append(TelemetryRow(item.table, {**item.row, "line": None if line is None else int(line) + shift}))  # type: ignore[call-overload]
    return rows, rejects


def _starts_table(lines: Sequence[str], command: str | None) -> bool:
    """At the table's top border, its date line, or its `| NVIDIA-SMI` header; or at the border of its Processes
    box pasted alone."""
    for line in lines[:3]:
        text = line.strip()
        if TABLE_HEADER.match(text) or _PROCESSES_TITLE.match(text):
            return True
        if not (text.startswith("+") or clock_time(text, None)):
            return False
    return False


def _dmon_continues(line: str) -> bool:
    tokens = line.split()
    return bool(tokens) and (line.lstrip().startswith("#") or tokens[0].isdigit() or tokens[0] in ("GPU", "ID"))


def _read_prometheus(block: Block, zone: tzinfo | None, at: datetime | None) -> tuple[list[TelemetryRow], list[Reject]]:
    scrape = Scrape(at=at).read(read_samples(iter(block.lines), block.first))
    return scrape.rows(), scrape.rejects


def _read_with(
    reader: Callable[..., Iterator[TelemetryRow | Reject]], zoned: bool
) -> Callable[[Block, tzinfo | None, datetime | None], tuple[list[TelemetryRow], list[Reject]]]:
    def read(block: Block, zone: tzinfo | None, at: datetime | None) -> tuple[list[TelemetryRow], list[Reject]]:
        return numbered(block, reader(block.lines, zone) if zoned else reader(block.lines))

    return read


TABLE_BLOCK = BlockFormat(
    _starts_table, table_line, _read_with(read_nvsmi_table, zoned=True), (b"NVIDIA-SMI", b"| Processes:")
)
QUERY_BLOCK = BlockFormat(
    # a report's banner, or a GPU's section pasted without it: its title names the bus id (domains 0000xxxx)
    lambda lines, _: starts_query_block(lines),
    report_line,
    _read_with(read_nvsmi_query, True),
    (b"NVSMI LOG", b"GPU 0000"),
)
ROCM_BLOCK = BlockFormat(
    # its banner, after whatever the lines carry before it (a job log's `host out: `); never after a comment's
    # mark, which the comment wrapper takes off
    lambda lines, _: looks_like_rocm_smi(lines[0]) and not lines[0].lstrip().startswith(("#", "//")),
    lambda line: not rocm_end(line),
    _read_with(read_rocm_smi, zoned=False),
    (b"ROCm System Management",),
)
CSV_BLOCK = BlockFormat(
    _starts_csv,
    _csv_continues,
    _read_csv,
    # a header's fields, the command naming them, or a header-less row with units (read under the command above
    # it, or refused with the reason). Cut so that none holds `memory`: a service log says "memory" on many lines,
    # and rg's needles (text/needles.py) would bring every one of them here to be checked.
    (b"ry.used", b"ry.tot", b"used_mem", b"used_gpu_mem", b"--query-", b"MiB, "),
)
# every sample of DCGM's or an engine's holds its prefix
PROMETHEUS_BLOCK = BlockFormat(
    lambda lines, _: starts_exposition(lines),
    exposition_line,
    _read_prometheus,
    (b"DCGM_FI_", b"dcgm_", b"vllm:", b"sglang:", b"tgi_"),
)


def dmon_block(kind: str) -> BlockFormat:
    """nvidia-smi's dmon (NVSMI_DMON) or dcgmi's (DCGMI_DMON) as a block."""

    def starts(lines: Sequence[str], command: str | None) -> bool:
        return dmon_kind("\n".join(lines[:2])) == kind

    def read(block: Block, zone: tzinfo | None, at: datetime | None) -> tuple[list[TelemetryRow], list[Reject]]:
        return numbered(block, read_dmon(block.lines, kind, zone))

    # its header, or the command above a header that names no `gpu` first (`-o TD`: `#Date Time gpu`)
    markers = (b"# gpu", b"#gpu", b"dmon") if kind == NVSMI_DMON else (b"#Entity", b"dcgmi")
    return BlockFormat(starts, _dmon_continues, read, markers)


def _read_series(block: Block, zone: tzinfo | None, at: datetime | None) -> tuple[list[TelemetryRow], list[Reject]]:
    """An API answer or export pasted in text: its series' rows, as a saved answer's (series_rows.py)."""
    from .series_rows import series_rows  # polars: only a text that holds such a block pays for it

    series, rejects = text_series(block.lines, block.first)
    rows = series_rows(series)
    found = [TelemetryRow(GPU_SAMPLES, row) for row in rows.gpu.drop("_names", strict=False).to_dicts()]
    found += [TelemetryRow(ENGINE_SAMPLES, row) for row in rows.engine.to_dicts()]
    return found, rejects + rows.rejects


# `curl .../api/v1/query_range | jq`: the answer's `resultType` (in its first lines, pretty or not)
PROM_API_BLOCK = BlockFormat(lambda lines, _: starts_api_block(lines), json_line, _read_series, (b'"resultType"',))
VM_EXPORT_BLOCK = BlockFormat(lambda lines, _: starts_export_block(lines), json_line, _read_series, (b'"timestamps"',))
