"""What one start-up memory line of a serving engine states: the sentence (`Wording`) an engine's source prints,
and the amounts read from a line that holds it (`Reading`). The engines' wordings live in vllm.py,
engines.py and llamacpp.py; startup.py merges the lines of one start-up into reports."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ...units import size_to_bytes

NUM = r"(-?\d+(?:\.\d+)?)"
UNIT = r"(GiB|GB|MiB|MB|KiB|KB|B|bytes)"
AMOUNT = rf"{NUM}\s*{UNIT}"  # two groups: a field ending in `_bytes` takes the number and its unit
# A device name that is not host memory: llama.cpp's and ollama's buffers are `CUDA0`, `ROCm1`, `Metal`, and
# the host's `CPU`, `CPU_Mapped`, `CUDA_Host` (pinned host memory), which no card holds.
DEVICE = r"(?!CPU)(?![\w.-]*_Host\b)([\w.-]+)"
COUNT_FIELDS = ("kv_cache_tokens", "kv_cache_blocks_gpu")


@dataclass(frozen=True, slots=True)
class Wording:
    """A sentence an engine prints at start-up: `pattern`'s groups are `fields`, in order.

    A field ending in `_bytes` takes two groups (number, unit; an empty unit is bytes), a field named twice is
    the sum of its parts (SGLang's K and V sizes), `device` takes the engine's name for the card.
    """

    framework: str
    marker: str  # a literal every line of this wording holds: textscan searches the log for it
    pattern: re.Pattern[str]
    fields: tuple[str, ...]
    variant: str = ""
    # Begins a start-up (a model load, a report's header): after the KV cache was sized, it begins the next one.
    opens: bool = False
    # Its fields fill only what the start-up has not said and never contradict it: a reading after the fact
    # (SGLang's `Memory pool end. avail mem`) stands in for the one at the start only when that is not logged.
    soft: bool = False


@dataclass(frozen=True, slots=True)
class Reading:
    """What one line states: amounts by field (`soft`: from soft wordings), and where its first wording begins
    (the text before is the line's prefix: process tags, timestamps)."""

    framework: str
    variant: str
    at: int
    amounts: dict[str, object] = field(default_factory=dict)
    soft: dict[str, object] = field(default_factory=dict)
    device: str | None = None
    opens: bool = False


def markers(wordings: Sequence[Wording]) -> tuple[bytes, ...]:
    """The distinct markers of some wordings, as textscan searches them."""
    return tuple(dict.fromkeys(w.marker.encode() for w in wordings))


def read_wordings(text: str, wordings: Sequence[Wording]) -> Reading | None:
    """What `text` states in any of `wordings` (the first to match names the framework), or None."""
    matched = list(_matches(text, wordings))
    if not matched:
        return None
    hard: dict[str, object] = {}
    soft: dict[str, object] = {}
    device = None
    for wording, match in matched:
        values = amounts(match, wording.fields)
        device = device or values.pop("device", None)
        (soft if wording.soft else hard).update({k: v for k, v in values.items() if k not in hard})
    return Reading(
        framework=matched[0][0].framework,
        variant=next((w.variant for w, _ in matched if w.variant), ""),
        at=min(m.start() for _, m in matched),
        amounts=hard,
        soft={k: v for k, v in soft.items() if k not in hard},
        device=None if device is None else str(device),
        opens=any(w.opens for w, _ in matched),
    )


def _matches(text: str, wordings: Sequence[Wording]) -> Iterator[tuple[Wording, re.Match[str]]]:
    """The wordings `text` holds, with their matches; a framework's wordings only (the first one found)."""
    framework = None
    for wording in wordings:
        if wording.marker not in text or (framework is not None and wording.framework != framework):
            continue
        match = wording.pattern.search(text)
        if match is not None:
            framework = wording.framework
            yield wording, match


def amounts(match: re.Match[str], fields: tuple[str, ...]) -> dict[str, object]:
    """The fields of one match, in bytes, counts, fractions or names."""
    groups = iter(match.groups())
    out: dict[str, object] = {}
    for name in fields:
        value = _field(name, groups)
        previous = out.get(name)
        out[name] = previous + value if isinstance(previous, int) and isinstance(value, int) else value
    return out


def _field(name: str, groups: Iterator[str | None]) -> object:
    """One field's value from the groups that state it."""
    if name.endswith("_bytes"):
        number, unit = next(groups), next(groups)
        return size_to_bytes(str(number), unit or "")
    if name in COUNT_FIELDS:
        return int(str(next(groups)).replace(",", ""))
    if name == "gpu_memory_utilization":
        return float(str(next(groups)))
    return next(groups)
