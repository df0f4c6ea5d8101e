"""The telemetry blocks of a text log, found as the text-log scan goes (parse/telemetry/blocks.py reads them):
only the lines holding one of the block formats' markers, and the few lines around them, are decoded. Kept apart
from blocks.py so that telling a file's format (which reads blocks.py through the registry) loads no search."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from functools import cache

from ..text.textscan import MarkerFinder, Window
from .blocks import COMMAND_REACH, Block, Blocked, Found, block_at, read_block


@cache
def block_finder(formats: tuple[Blocked, ...]) -> MarkerFinder:
    """The finder of the lines that may belong to a block of one of `formats`: pass it to
    scan_text_log(also=...) to share the OOM scan's search."""
    return MarkerFinder(tuple(dict.fromkeys(m for fmt in formats if fmt.block for m in fmt.block.markers)))


# How far a block may reach past the marked line it was found by: nvidia-smi's table of 8 GPUs and a hundred
# processes, or a scrape of a few thousand samples; a block cut there is read up to the cut.
_BLOCK_LINES = 5000
_FIRST_LINES = 64


@dataclass
class BlockScanner:
    """Reads the blocks of `formats` in successive windows of one text log, as the text-log scan hands them over
    (`scan_text_log(on_window=...)`, `also=[block_finder(formats)]`): only the regions around marked lines are
    decoded."""

    formats: tuple[Blocked, ...]
    zone: tzinfo | None = None
    at: datetime | None = None
    found: list[Found] = field(default_factory=list)
    _done: int = 0  # the last line of the last block read: its other marked lines are in it

    def __post_init__(self) -> None:
        self._finder = block_finder(self.formats)

    def window(self, window: Window) -> None:
        for hit, line in window.marked(self._finder):
            if line > self._done:
                self._read_at(window, hit, line)

    def _read_at(self, window: Window, hit: int, line: int) -> None:
        """The block the marked line at `hit` belongs to: looked for in the few lines after it, read whole in up
        to _BLOCK_LINES when it reaches further (most marked lines belong to no block, and cost that little)."""
        for reach in (_FIRST_LINES, _BLOCK_LINES):
            lines, first, cut = _region(window, hit, line, reach)
            found = _block_covering(lines, self.formats, first, line, self._done)
            if found is None:
                return
            block, fmt = found
            if not cut or block.first + len(block.lines) < first + len(lines) or reach == _BLOCK_LINES:
                self.found.append(read_block(block, fmt, self.zone, self.at))
                self._done = block.first + len(block.lines) - 1
                return


def _region(window: Window, hit: int, line: int, reach: int) -> tuple[list[str], int, bool]:
    """The lines around the marked one at offset `hit` (number `line`): a few before it (a block's border or the
    command above it), and up to `reach` after it; with the number of the first, and whether lines were left
    after them."""
    start, before = hit, 0
    while before < COMMAND_REACH + 2 and start > 0:
        previous = window.buf.rfind(b"\n", 0, start - 1)
        start, before = previous + 1, before + 1
        if previous < 0:
            break
    end, cut = hit, True
    for _ in range(reach):
        end = window.buf.find(b"\n", end, len(window.buf)) + 1
        if end <= 0:
            end, cut = len(window.buf), False
            break
    text = bytes(window.buf[start:end]).decode("utf-8", errors="replace")
    return text.splitlines(), line - before, cut


def _block_covering(
    lines: list[str], formats: Sequence[Blocked], first: int, line: int, done: int
) -> tuple[Block, Blocked] | None:
    """The block that reaches the marked line from above it (after `done`, the last line already read), or starts
    just below it (the marked line is the command that printed it)."""
    for index in range(max(0, done + 1 - first), min(len(lines), line - first + 1 + COMMAND_REACH)):
        found = block_at(lines, index, formats, first)
        if found is not None and found[0].first + len(found[0].lines) > line:
            return found
    return None
