"""Bounds on the work a snapshot may cause, each derived from what an honest file can hold.

A pickle shares objects: one string or list stored once can be referenced by thousands of others, and a
structure that is walked or printed without regard to that sharing grows exponentially with its depth. So
every walk of snapshot data here is bounded by the input it came from: a pickle opcode is at least one
byte, so an honest file holds no more objects than bytes, and nothing that is repeated per row may grow
with the number of references rather than with the bytes that were read.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import InputError

# Linux's PATH_MAX: a frame's file name longer than this cannot name a file Python ran. The same bound caps
# function names (the longest in the real captures, a demangled C++ template, is 1,594 characters). Longer
# text is cut and says so, so that a string a pickle stores once cannot fill every row that names it.
MAX_TEXT = 4096
# Block states, segment types and trace actions are short enum words (`active_pending_free`, the longest,
# is 19 characters); 64 leaves room for new ones and bounds what millions of trace rows repeat.
MAX_LABEL = 64
# allocator_settings nests two levels (`roundup_power2_divisions`), external_annotations three; json.dumps
# and DuckDB's JSON reader recurse once per level.
MAX_DEPTH = 32
# The budgets below for an object built in memory rather than read from a file (tests, callers of
# snapshot_from_object): the size of the largest real capture, big_trace (250 MB).
DEFAULT_INPUT_BYTES = 256 << 20
# Frame comparisons per byte of input the stack interner may make (Budget.frame_comparisons): the real
# captures make 0.03-0.27, big_trace_cpp (67-frame C++ stacks) 0.72, about one frames list per trace entry.
FRAME_COMPARISONS_PER_BYTE = 8
INT64_MIN, INT64_END = -(1 << 63), 1 << 63
_UINT64_END = 1 << 64


@dataclass(frozen=True)
class Budget:
    """What one snapshot may cost, from `input_bytes`: the decompressed size of the file it was read from."""

    input_bytes: int

    @classmethod
    def for_input(cls, input_bytes: int | None) -> Budget:
        return cls(DEFAULT_INPUT_BYTES if input_bytes is None else max(0, int(input_bytes)))

    @property
    def objects(self) -> int:
        """Objects a walk may visit: an opcode is >= 1 byte, so an honest file has fewer objects than bytes
        (the constant covers the few a tiny file may hold)."""
        return self.input_bytes + 1024

    @property
    def json_chars(self) -> int:
        """JSON text the settings and annotations may serialise to. Without sharing one pickle byte becomes at
        most 6 characters (`N`, one byte for None, is `null, `) and a float's 9 bytes at most 26, so 8 per byte
        is more than any unshared structure needs; more is a shared object written out again and again."""
        return 8 * self.input_bytes + 4096

    @property
    def table_text(self) -> int:
        """Characters of frame and site text the stacks and frames tables may hold, every row counted (DuckDB
        stores each row's copy). A row names its frame in >= 1 byte of pickle, and the real captures' frame
        and site text is at most 0.15x their decompressed size (big_trace_cpp, C++ frames included): 4x plus
        32 MiB for small files never stops an honest snapshot, but a string the file stores once cannot be
        repeated into gigabytes."""
        return 4 * self.input_bytes + (32 << 20)

    @property
    def frame_comparisons(self) -> int:
        """Frame-by-frame comparisons the stack interner may make while matching frames lists: the real
        captures need at most 0.72 per byte (about one list comparison per trace entry), and a list that is not
        shared pays for its comparisons with its own bytes; a long list stored once but named by millions of
        entries would otherwise be walked once per name."""
        return FRAME_COMPARISONS_PER_BYTE * self.input_bytes + (4 << 20)


def bounded_text(text: str, limit: int = MAX_TEXT) -> str:
    """`text`, or its start and a marker saying how many characters were cut, `limit` characters at most (so
    cutting again changes nothing)."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(f"...[{len(text)} more characters]"))
    return f"{text[:keep]}...[{len(text) - keep} more characters]"


def kind_of(value: object) -> str:
    """What a value is, for a message, without str() or repr() of it (a shared tuple prints exponentially)."""
    if value is None:
        return "missing"
    if isinstance(value, str):
        return f"a {len(value)}-character text"
    name = type(value).__name__
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def key_name(key: object) -> str:
    """A dict key as a message names it: a short text quoted, anything else by its type."""
    if isinstance(key, str):
        return repr(bounded_text(key, 40))
    if type(key) in (int, float, bool):
        return repr(key)
    return kind_of(key)


def text_value(value: object, key: str, where: str, name: str, *, limit: int = MAX_LABEL) -> str:
    """A value that must be text (a state, an action, a segment type), cut to `limit`; InputError otherwise."""
    if type(value) is str:
        return bounded_text(value, limit)
    raise InputError(name, f"not a PyTorch memory snapshot: {where} '{key}' is {kind_of(value)}, not text")


def int64_value(value: object, key: str, where: str, name: str) -> int | None:
    """An integer column's value (None where absent); InputError naming the key for anything else."""
    if value is None or (type(value) is int and INT64_MIN <= value < INT64_END):
        return value  # type: ignore[return-value]
    if type(value) is bool:
        return int(value)
    reason = "does not fit in 64 bits" if type(value) is int else f"is {kind_of(value)}, not an integer"
    raise InputError(name, f"not a PyTorch memory snapshot: {where} '{key}' {reason}")


def plain_json(value: object, what: str, name: str, budget: JsonBudget) -> object:
    """A copy of `value` as plain JSON data (dicts, lists, text, numbers), walked as a tree: a shared object
    is copied (and counted) each time it is reached, so the copy is exactly what json.dumps would write, and
    the walk stops with an InputError at MAX_DEPTH levels or when `budget` runs out."""
    return _JsonWalk(what, name, budget).copy(value, 0)


class JsonBudget:
    """Objects and characters left for the JSON copies of one snapshot's settings and annotations."""

    def __init__(self, budget: Budget) -> None:
        self.objects = self.max_objects = budget.objects
        self.chars = self.max_chars = budget.json_chars
        self.input_bytes = budget.input_bytes


class _JsonWalk:
    def __init__(self, what: str, name: str, budget: JsonBudget) -> None:
        self.what, self.name, self.budget = what, name, budget

    def copy(self, value: object, depth: int) -> object:
        budget = self.budget
        budget.objects -= 1
        kind = type(value)
        # What json.dumps writes for the value and its separator (`"text", `, `[], `, `null, `, `false, `);
        # escapes can make text up to 6x longer, which keeps the total proportional all the same.
        if kind is str:
            budget.chars -= len(value) + 4  # type: ignore[arg-type]
        elif kind is int:
            budget.chars -= _int_chars(value)  # type: ignore[arg-type]
        elif kind is float:
            budget.chars -= 26  # the longest repr of a float, `-2.2250738585072014e-308, `
        else:
            budget.chars -= 7  # containers, None and booleans
        if budget.objects < 0 or budget.chars < 0:
            raise self._refuse(
                f"would serialise to more than {self._limit()} (shared objects repeated; the file has "
                f"{budget.input_bytes} bytes)"
            )
        if value is None or kind in (str, bool, float):
            return value
        if kind is int:
            if not INT64_MIN <= value < _UINT64_END:  # type: ignore[operator]
                raise self._refuse("holds an integer wider than 64 bits")
            return value
        if kind in (list, tuple, dict):
            if depth >= MAX_DEPTH:
                raise self._refuse(f"nests deeper than {MAX_DEPTH} levels")
            if kind is dict:
                return {self._key(k): self.copy(v, depth + 1) for k, v in value.items()}  # type: ignore[attr-defined]
            return [self.copy(item, depth + 1) for item in value]  # type: ignore[attr-defined]
        raise self._refuse(f"holds {kind_of(value)}, not JSON data")

    def _key(self, key: object) -> str | int | float | bool | None:
        if key is None or type(key) in (str, bool, float) or (type(key) is int and INT64_MIN <= key < _UINT64_END):
            self.budget.chars -= len(key) + 4 if type(key) is str else 28  # type: ignore[arg-type]
            return key  # type: ignore[return-value]
        raise self._refuse(f"has a key that is {kind_of(key)}, not text")

    def _limit(self) -> str:
        return f"{self.budget.max_objects} objects or {self.budget.max_chars} characters"

    def _refuse(self, reason: str) -> InputError:
        return InputError(self.name, f"not a PyTorch memory snapshot: its {self.what} {reason}")


def _int_chars(value: int) -> int:
    """Characters json.dumps writes for a 64-bit int and its separator, without formatting it."""
    return len(str(value)) + 2 if INT64_MIN <= value < _UINT64_END else 0
