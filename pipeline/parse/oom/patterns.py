"""Building blocks for OOM message formats: whitespace-tolerant patterns, signatures, field extraction."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...units import size_to_bytes

# Units as frameworks print them; "GB"/"MB" are binary (docs/domain.md), `size_to_bytes` knows them all.
# `\d\d*`, not `\d+`: a leading character class lets `re` skip to digits instead of trying every position.
_NUM = r"\d\d*(?:\.\d+)?"
_UNIT = r"(?:bytes?|[KkMmGgTtPp]i?[Bb]|[KMGTP](?![A-Za-z])|B(?![A-Za-z]))"
SIZE = rf"(?P<v_n>{_NUM})\s*(?P<v_u>{_UNIT})"
BYTES = r"(?P<v_b>\d\d*)"
# A byte count perhaps with thousands separators (CuPy's `25,600,000 bytes`).
COUNT = r"(?P<v_c>\d{1,3}(?:,\d{3})+(?!\d)|\d\d*)"

# Any wording that says memory ran out; used as the anchor of formats recognised by their context.
OOM_WORDS = r"(?:(?i:out of memory)|OutOfMemory|OUT_OF_MEMORY|_ALLOC_FAILED|ErrorMemoryAllocation)"

Fields = dict[str, Any]
Extra = Callable[[str], Fields]


def _named_size(match: re.Match[str]) -> str:
    """`{SIZE:field}` as a number group `field__n` and a unit group `field__u`."""
    name = match.group(1)
    return rf"(?P<{name}__n>{_NUM})\s*(?P<{name}__u>{_UNIT})"


def rx(pattern: str) -> re.Pattern[str]:
    """Compile `pattern` with {SIZE}/{SIZE:field}/{BYTES}/{COUNT}/{OOM} expanded and each space read as `\\s*`.

    Wrapped lines are joined without adding characters, so words stay whole but the spaces
    between them may be missing, doubled or turned into newlines: hence `\\s*`, never ` `.
    """
    expanded = pattern.replace("{SIZE}", SIZE).replace("{BYTES}", BYTES).replace("{COUNT}", COUNT)
    expanded = expanded.replace("{OOM}", OOM_WORDS)
    expanded = re.sub(r"\{SIZE:(\w+)\}", _named_size, expanded)
    return re.compile(expanded.replace(" ", r"\s*"))


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One way a message states one OomMessage field.

    The pattern has a v_n/v_u, v_b, v_c or gpu group; or, when `size_before` is set, it is only the
    words that follow the size (`total capacity`), matched where a size ends. Patterns that begin
    with a number make `re` try every digit in the text, which costs 30x more than a literal.
    """

    name: str
    pattern: re.Pattern[str]
    size_before: bool = False


def F(name: str, pattern: str) -> FieldSpec:
    """A FieldSpec from a readable pattern (see `rx`)."""
    if pattern.startswith("{SIZE} "):
        return FieldSpec(name, rx(pattern.removeprefix("{SIZE} ")), size_before=True)
    return FieldSpec(name, rx(pattern))


@dataclass(frozen=True, slots=True)
class Whole:
    """A whole-message pattern and, per field it captures, (field, kind): kind is size, int or procs.

    Its groups: `f__n`/`f__u` for a size, a group named after an int field, and `procs` holding
    the `... memory in use.` sentences. One regex over a well-formed message costs a tenth of a
    search per field; `extract_fields` falls back to the per-field specs (same results) otherwise.
    """

    pattern: re.Pattern[str]
    plan: tuple[tuple[str, str, str], ...]  # (field, kind, group): a size's group is its number's, `f__n`


def whole(pattern: str) -> Whole:
    """A Whole from a readable pattern (see `rx`)."""
    compiled = rx(pattern)
    plan = []
    for key in compiled.groupindex:
        if key.endswith("__n"):
            plan.append((key[:-3], "size", key))
        elif key == "procs":
            plan.append((key, "procs", key))
        elif not key.endswith("__u"):
            plan.append((key, "int", key))
    return Whole(compiled, tuple(plan))


@dataclass(frozen=True, slots=True)
class Signature:
    """One message format: anchors that identify it, an optional context it needs, and its fields.

    `tail` marks the end of a message; formats without one are one-line formats, except `open_ended`
    ones, whose continuation lines a log scanner keeps reading (TensorFlow's `[[Node: ...]]`). `follow`
    matches the lines that report the same failure right after the message, even as log records of their own
    (TensorFlow 1.x: the op's `OOM when allocating tensor` after the allocator's `Ran out of memory`).
    """

    framework: str
    anchors: tuple[re.Pattern[str], ...]
    fields: tuple[FieldSpec, ...] = ()
    context: re.Pattern[str] | None = None
    tail: re.Pattern[str] | None = None
    open_ended: bool = False
    extras: tuple[Extra, ...] = field(default=())
    wholes: tuple[Whole, ...] = ()  # whole-message patterns tried before the field specs
    follow: re.Pattern[str] | None = None

    def find(self, text: str, raw: str) -> re.Match[str] | None:
        """The first anchor match in `text`, if the context (when required) is in `raw`.

        The context is looked for in the raw input because log prefixes, which the cleaned
        text has lost, often name the component (`I tensorflow/stream_executor/...`).
        """
        if self.context is not None and self.context.search(raw) is None:
            return None
        for anchor in self.anchors:
            match = anchor.search(text)
            if match is not None:
                return match
        return None

    def state(self, text: str, start: int) -> str:
        """How far the message that starts at `start` got.

        "ended": its closing words were seen; "complete": a one-line format; "partial": its end
        was not seen yet (open-ended formats always stay partial).
        """
        if self.open_ended:
            return "partial"
        if self.tail is None:
            return "complete"
        return "ended" if self.tail.search(text, start) is not None else "partial"


def signature(framework: str, *anchors: str, **options: Any) -> Signature:
    """A Signature from readable anchor patterns (see `rx`)."""
    return Signature(framework, tuple(rx(anchor) for anchor in anchors), **options)


def match_value(match: re.Match[str]) -> int:
    """The byte count (or GPU index) a field pattern captured."""
    groups = match.groupdict()
    if groups.get("gpu") is not None:
        return int(groups["gpu"])
    if groups.get("v_b") is not None:
        return int(groups["v_b"])
    if groups.get("v_c") is not None:
        return int(groups["v_c"].replace(",", ""))
    return size_to_bytes(groups["v_n"], groups["v_u"])


_UNIT_ONLY = re.compile(r"bytes?|[KkMmGgTtPp]i?[Bb]|[KMGTP]|B")
_NUM_ONLY = re.compile(r"\d+(?:\.\d+)?")


def _skip_back(text: str, end: int, accept: Callable[[str], bool], limit: int) -> int:
    """The start of the run of at most `limit` characters ending at `end` that `accept` takes."""
    start = end
    while start > 0 and end - start < limit and accept(text[start - 1]):
        start -= 1
    return start


def size_ending_at(text: str, end: int) -> int | None:
    """The size (`135.29 GiB`, `1.02GiB`, `0 bytes`) written just before `end`, in bytes; None if none."""
    unit_end = _skip_back(text, end, str.isspace, 8)
    unit_start = _skip_back(text, unit_end, str.isalpha, 5)
    number_end = _skip_back(text, unit_start, str.isspace, 8)
    number_start = _skip_back(text, number_end, lambda c: c.isdigit() or c == ".", 40)
    unit, number = text[unit_start:unit_end], text[number_start:number_end]
    if not _UNIT_ONLY.fullmatch(unit) or not _NUM_ONLY.fullmatch(number):
        return None
    return size_to_bytes(number, unit)


def _size_before(spec: FieldSpec, text: str) -> int | None:
    """The size written just before the first occurrence of `spec`'s words that has one."""
    for match in spec.pattern.finditer(text):
        value = size_ending_at(text, match.start())
        if value is not None:
            return value
    return None


def extract_fields(sig: Signature, text: str) -> tuple[Fields, bool]:
    """Every field `sig` knows how to read from `text` (the first spec that matches a field wins),
    and whether a whole layout matched: each ends with its signature's closing words (`tail`)."""
    for layout in sig.wholes:
        match = layout.pattern.search(text)
        if match is not None:
            return whole_fields(layout, match), True
    return _spec_fields(sig, text), False


def _spec_fields(sig: Signature, text: str) -> Fields:
    """The fields of `text` read one spec at a time."""
    found: Fields = {}
    for spec in sig.fields:
        if spec.name in found:
            continue
        if spec.size_before:
            value = _size_before(spec, text)
            if value is not None:
                found[spec.name] = value
        elif (match := spec.pattern.search(text)) is not None:
            found[spec.name] = match_value(match)
    for extra in sig.extras:
        for name, value in extra(text).items():
            found.setdefault(name, value)
    return found


def whole_fields(spec: Whole, match: re.Match[str]) -> Fields:
    """The fields a match of `spec` states."""
    found: Fields = {}
    groups = match.groupdict()  # one call for all groups: this runs for every message of a large log
    for name, kind, group in spec.plan:
        value = groups[group]
        if value is None:
            continue
        if kind == "size":
            found[name] = size_to_bytes(value, groups[name + "__u"])
        elif kind == "procs":
            found.update(process_sentences(value))
        else:
            found[name] = int(value)
    return found


_PROCESS = rx(r"Process (?P<pid>\d+) has {SIZE} memory in use")
_THIS_PROCESS = rx(r"this process has {SIZE} memory in use")


def other_processes(text: str) -> Fields:
    """`Process P has M memory in use.` lines as ((pid, bytes), ...)."""
    found = tuple((int(m["pid"]), match_value(m)) for m in _PROCESS.finditer(text))
    return {"other_processes": found} if found else {}


def process_sentences(text: str) -> Fields:
    """The other processes and this process's own use, from PyTorch's `... memory in use.` sentences."""
    found = other_processes(text)
    match = _THIS_PROCESS.search(text)
    if match is not None:
        found["process_in_use_bytes"] = match_value(match)
    return found


# TensorFlow DataTypeString names and their element sizes.
_TF_DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "bool": 1,
    "complex64": 8,
    "complex128": 16,
    "qint8": 1,
    "quint8": 1,
    "qint16": 2,
    "quint16": 2,
    "qint32": 4,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
_TF_TENSOR = rx(r"shape ?\[(?P<dims>[\d,\s]*)\] ?and type (?P<dtype>[a-z][a-z0-9_]*)")


def tf_tensor_bytes(text: str) -> Fields:
    """requested_bytes of `OOM when allocating tensor with shape[a,b] and type T`: a*b*sizeof(T)."""
    match = _TF_TENSOR.search(text)
    if match is None or match["dtype"] not in _TF_DTYPE_BYTES:
        return {}
    count = 1
    for dim in re.split(r"[,\s]+", match["dims"].strip()):
        if dim:
            count *= int(dim)
    return {"requested_bytes": count * _TF_DTYPE_BYTES[match["dtype"]]}


# Newer vLLM v1 releases name the device (`Free memory on device cuda:1 (19.77/22.05 GiB)`,
# https://github.com/pytorch/pytorch/issues/175666), earlier ones do not.
_VLLM_FREE = rx(
    r"Free memory on device ?(?:[a-z]+ ?: ?(?P<gpu>\d+) )?"
    rf"\( ?(?P<free>{_NUM}) ?/ ?(?P<total>{_NUM}) ?(?P<unit>{_UNIT}) ?\)"
)


def vllm_free_total(text: str) -> Fields:
    """free, total and the device of vLLM's `Free memory on device (10.5/79.1 GiB) on startup is less than ...`."""
    match = _VLLM_FREE.search(text)
    if match is None:
        return {}
    unit = match["unit"]
    found: Fields = {
        "free_bytes": size_to_bytes(match["free"], unit),
        "total_capacity_bytes": size_to_bytes(match["total"], unit),
    }
    if match["gpu"] is not None:
        found["gpu_index"] = int(match["gpu"])
    return found
