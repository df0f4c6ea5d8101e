"""PyTorch's allocator settings as a process states them: `PYTORCH_CUDA_ALLOC_CONF` (`PYTORCH_ALLOC_CONF` since
PyTorch 2.9, `PYTORCH_HIP_ALLOC_CONF` on ROCm), a comma-separated list of `option:value` pairs
(`expandable_segments:True,max_split_size_mb:128`, `roundup_power2_divisions:[256:1,512:2,>:8]`).

A text log states them where a service prints its environment (`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`,
`export ...`, `'PYTORCH_CUDA_ALLOC_CONF': '...'` in a printed dict); PyTorch's own OOM message names the variable
too, as advice (`try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation`), which says
nothing of what the process runs with, so such lines are not settings.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from .text.textscan import Buffer, MarkerFinder, Window, line_text

# The environment variables PyTorch reads its allocator's options from, newest name first.
VARIABLES = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")
SETTINGS_FINDER = MarkerFinder([b"_ALLOC_CONF"])  # every name above holds it; for scan_text_log(also=...)

# `NAME=value`, `NAME: value`, `'NAME': 'value'`, `environ["NAME"] = "value"`: the value up to a quote, a space
# or the end.
_ASSIGNMENT = re.compile(r"\b(PYTORCH_(?:CUDA_|HIP_)?ALLOC_CONF)['\"]?\]?\s*[=:]\s*['\"]?([^\s'\"]+)")
# Words of PyTorch's own messages that name the variable without stating what the process runs with: the OOM
# message's advice, and the deprecation warning of the old name.
_NOT_A_SETTING = ("try setting", "to avoid fragmentation", "deprecated", "See documentation")
# A log that wraps the OOM message puts its advice's `PYTORCH_CUDA_ALLOC_CONF=...` on a line of its own: the words
# around it (the end of the line before, the start of the line after) say it is advice. The advice's words are
# within this many bytes of the variable however the message is wrapped.
_AROUND_BYTES = 64
_ADVICE_BEFORE = "try setting"
_ADVICE_AFTER = "to avoid"
_OPTION = re.compile(r"^[a-z][a-z0-9_]*$")
_BOOLEANS = {"true": "true", "1": "true", "yes": "true", "false": "false", "0": "false", "no": "false"}
# Options whose value is a switch: written as PyTorch accepts them (True / true / 1), stored as true / false.
_SWITCHES = frozenset({"expandable_segments", "pinned_use_cuda_host_register", "release_lock_on_cudamalloc"})


def parse_alloc_conf(text: str) -> tuple[tuple[str, str], ...]:
    """The (option, value) pairs of an allocator configuration string, options in lower case, switches as
    `true` / `false`; a piece that is not `option:value` is left out (PyTorch would refuse the whole string,
    but what else it says is still what the process was given)."""
    pairs = []
    for piece in _top_level_pieces(text.strip().strip("'\"")):
        option, sep, value = piece.partition(":")
        option, value = option.strip().lower(), value.strip()
        if not sep or not value or not _OPTION.match(option):
            continue
        if option in _SWITCHES:
            value = _BOOLEANS.get(value.lower(), value)
        pairs.append((option, value))
    return tuple(pairs)


def _top_level_pieces(text: str) -> list[str]:
    """`text` split at the commas outside brackets (roundup_power2_divisions' list holds commas)."""
    pieces, depth, start = [], 0, 0
    for at, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            pieces.append(text[start:at])
            start = at + 1
    pieces.append(text[start:])
    return [p for p in pieces if p.strip()]


@dataclass(frozen=True)
class StatedSettings:
    """One line of a log that states the allocator's settings."""

    line: int
    ts: datetime | None
    variable: str
    settings: tuple[tuple[str, str], ...]


def settings_in_line(text: str) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """(variable, settings) when a log line sets the allocator's configuration, else None."""
    if any(word in text for word in _NOT_A_SETTING):
        return None
    found = _ASSIGNMENT.search(text)
    if found is None:
        return None
    settings = parse_alloc_conf(found[2])
    return (found[1], settings) if settings else None


@dataclass
class SettingsScanner:
    """Reads the lines that state allocator settings from the windows of a text log's OOM scan
    (`scan_text_log(on_window=...)`, `also=[SETTINGS_FINDER]`); `clock` gives a line its time (None without)."""

    clock: Callable[[str], datetime | None]
    found: list[StatedSettings] = field(default_factory=list)

    def window(self, window: Window) -> None:
        buf = window.buf
        for start, line in window.marked(SETTINGS_FINDER):
            found = buf.find(b"\n", start, len(buf))
            end = len(buf) if found < 0 else found
            text = line_text(buf, start, end, SETTINGS_FINDER)
            stated = settings_in_line(text)
            if stated is not None and not _wrapped_advice(buf, start, end):
                self.found.append(StatedSettings(line, self.clock(text), *stated))


def _wrapped_advice(buf: Buffer, start: int, end: int) -> bool:
    """Whether the line at buf[start:end] is the advice of an OOM message wrapped onto lines of its own."""
    before = bytes(buf[max(0, start - _AROUND_BYTES) : start]).decode("utf-8", errors="replace")
    after = bytes(buf[end : end + _AROUND_BYTES]).decode("utf-8", errors="replace")
    return before.rstrip().endswith(_ADVICE_BEFORE) or after.lstrip().startswith(_ADVICE_AFTER)
