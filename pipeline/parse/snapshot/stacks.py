"""Stack interning for snapshots, and the allocation site of a stack (first frame outside plumbing)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ...errors import InputError
from .limits import FRAME_COMPARISONS_PER_BYTE, INT64_END, INT64_MIN, MAX_TEXT, Budget, bounded_text, key_name, kind_of

Frame = dict[str, Any]

# Files whose frames only pass a call along: module call wrappers, decorators, dispatch. The whole of
# torch/nn/modules/module.py is plumbing so that `model.to()` is attributed to the caller's `to`.
PLUMBING_FILES: tuple[str, ...] = (
    "torch/nn/modules/module.py",
    "torch/utils/_contextlib.py",
    "/contextlib.py",
    "/functools.py",
    "torch/autograd/",
    "torch/_dynamo/eval_frame.py",
    "torch/_compile.py",
    "torch/overrides.py",
    "torch/_ops.py",
    "torch/utils/_device.py",
    "torch/_tensor.py",
    "transformers/utils/generic.py",
    "transformers/utils/output_capturing.py",
)
# C++ frames from the allocator, the unwinder and the interpreter say nothing about who allocated
# (the same lists as torch.cuda._memory_viz._frame_filter, plus the allocator's own code).
_CPP_NOISE_NAMES = (
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "_start",
    "__libc_start_main",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
    "CUDACachingAllocator",
    "c10::",
    "at::empty",
    "at::native::empty",
    "at::detail::empty",
    "_PyEval",
    "Py_",
    "PyCMethod",
    "PyMethod",
    "_PyObject",
    "PyType_",
    "PyRun_",
    "_PyRun",
    "__libc",
)
_CPP_NOISE_FILES = (
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "Objects/methodobject.c",
    "pycore_ceval.h",
    "ceval.c",
    "cpython/abstract.h",
    "memory_snapshot.cpp",
    "CUDACachingAllocator.cpp",
)
_SHORTEN_AFTER = ("site-packages/", "dist-packages/")
NO_STACK = "<no stack>"


@dataclass
class StackInterner:
    """Gives each distinct frames list a dense stack id, in the order the lists are first met; lists compare by
    content, shared dicts by id. A list equal by content to a known stack (filename, name, line of each frame)
    but built of other frame dicts, as a JSON snapshot and some pickles have them, gets that stack's id as it
    is met, so every id is final when given and a streamed trace is never renumbered.

    Every list that becomes a stack is checked first (a list of dicts of text and numbers, text cut to
    MAX_TEXT in place, so a frame the pickle stores once is cut once): later lists are compared against
    checked ones only, which keeps each comparison to a pass over plain values, however the unchecked list
    nests. The comparisons themselves are counted against the budget: a list stored once but named by
    millions of entries is compared once per name."""

    stacks: list[list[Frame]]
    _candidates: dict[object, list[tuple[list[Frame], int]]]
    name: str = "<snapshot>"
    comparisons_left: int = Budget.for_input(None).frame_comparisons
    _by_content: dict[tuple[tuple[Any, ...], ...], int] = field(default_factory=dict)

    @classmethod
    def empty(cls, name: str = "<snapshot>", budget: Budget | None = None) -> StackInterner:
        return cls([], {}, name, (budget or Budget.for_input(None)).frame_comparisons)

    def intern_all(self, frame_lists: Iterable[list[Frame] | None]) -> list[int]:
        """Stack ids for `frame_lists`, in order; a missing list counts as an empty stack."""
        # A tight loop: a cheap key (identity of the innermost frame dict, and length) narrows the
        # candidates; list equality, which short-cuts on identical frame dicts, confirms. Keying on the
        # whole tuple of frame ids is 3-4x slower on a 2M-entry trace.
        out: list[int] = []
        append, get = out.append, self._candidates.get
        left = self.comparisons_left
        for frames in frame_lists:
            if not frames:
                frames = []
                key: object = None
                count = 0
            else:
                count = len(frames)
                key = (id(frames[0]), count)
            bucket = get(key)
            if bucket is not None:
                for known, stack_id in bucket:
                    left -= count  # at most this many frame comparisons
                    if known == frames:
                        append(stack_id)
                        break
                else:
                    append(self._add(frames, key, bucket))
                if left < 0:  # one entry's scan is bounded by its bucket, whose stacks each cost their length
                    raise self._too_many_comparisons()
            else:
                append(self._add(frames, key, None))
        self.comparisons_left = left
        return out

    def _add(self, frames: list[Frame], key: object, bucket: list[tuple[list[Frame], int]] | None) -> int:
        """The id of a list not met before: a known stack's where the content is equal, else a new one. The
        content key is built once per distinct list object, each of which the input had to spell out."""
        check_frames(frames, self.name)
        stack_id = self._by_content.setdefault(_frames_key(frames), len(self.stacks))
        if stack_id == len(self.stacks):
            self.stacks.append(frames)
        if bucket is None:
            self._candidates[key] = [(frames, stack_id)]
        else:
            bucket.append((frames, stack_id))
        return stack_id

    def _too_many_comparisons(self) -> InputError:
        return InputError(
            self.name,
            "not a PyTorch memory snapshot: its frames lists are shared so often that matching them would take "
            f"more frame comparisons than the file's size allows ({FRAME_COMPARISONS_PER_BYTE} per byte)",
        )


def check_frames(frames: object, name: str) -> None:
    """A frames list must be a list of dicts whose values are text or numbers, `filename` and `name` text;
    text longer than MAX_TEXT is cut in place (the dict is the pickle's own, shared by every stack naming
    it). InputError, naming the key, for anything else: such a value is never printed or compared."""
    if type(frames) not in (list, tuple):
        raise InputError(name, f"not a PyTorch memory snapshot: a 'frames' value is {kind_of(frames)}, not a list")
    for frame in frames:  # type: ignore[attr-defined]
        if type(frame) is not dict:
            raise InputError(name, f"not a PyTorch memory snapshot: a stack frame is {kind_of(frame)}, not a dict")
        for key, value in frame.items():
            kind = type(value)
            if kind is str:
                if len(value) > MAX_TEXT:
                    frame[key] = bounded_text(value)  # replaces a value, never adds a key: safe mid-iteration
            elif kind is int:
                if not INT64_MIN <= value < INT64_END:
                    raise InputError(
                        name, f"not a PyTorch memory snapshot: a stack frame's {key_name(key)} does not fit in 64 bits"
                    )
            elif value is not None and kind not in (float, bool):
                raise InputError(
                    name,
                    f"not a PyTorch memory snapshot: a stack frame's {key_name(key)} is {kind_of(value)}, "
                    "not text or a number",
                )
        for key in ("filename", "name"):
            value = frame.get(key, "")
            if type(value) is not str:
                raise InputError(
                    name, f"not a PyTorch memory snapshot: a stack frame's '{key}' is {kind_of(value)}, not text"
                )


def _frames_key(frames: Sequence[Frame]) -> tuple[tuple[Any, ...], ...]:
    return tuple((f.get("filename"), f.get("name"), f.get("line")) for f in frames)


def shorten_path(filename: str) -> str:
    """The path after `site-packages/`, so sites read `transformers/cache_utils.py`."""
    for marker in _SHORTEN_AFTER:
        cut = filename.rfind(marker)
        if cut >= 0:
            return filename[cut + len(marker) :]
    return filename


def is_python_frame(frame: Frame) -> bool:
    return str(frame.get("filename", "")).endswith(".py")


def is_plumbing(frame: Frame) -> bool:
    """A Python frame that only forwards a call (module wrappers, decorators, autograd)."""
    filename = str(frame.get("filename", ""))
    return any(part in filename for part in PLUMBING_FILES)


def _is_cpp_noise(frame: Frame) -> bool:
    name, filename = str(frame.get("name", "")), str(frame.get("filename", ""))
    return any(n in name for n in _CPP_NOISE_NAMES) or any(f in filename for f in _CPP_NOISE_FILES)


def site_frame(frames: Sequence[Frame]) -> Frame | None:
    """The frame that names the allocation site: the innermost Python frame outside plumbing."""
    python = [f for f in frames if is_python_frame(f)]
    for frame in python:
        if not is_plumbing(frame):
            return frame
    if python:
        return python[0]
    return next((f for f in frames if not _is_cpp_noise(f)), frames[0] if frames else None)


def format_site(frame: Frame | None) -> str:
    """`file:function:line`, the file shortened after site-packages."""
    if frame is None:
        return NO_STACK
    return f"{shorten_path(str(frame.get('filename', '?')))}:{frame.get('name', '?')}:{frame.get('line', 0)}"


def stack_tables(
    stacks: Sequence[Sequence[Frame]], name: str, budget: Budget | None = None
) -> tuple[pa.Table, pa.Table]:
    """The `stacks` table (one row per stack: frame count and allocation site) and the `frames` table (one row
    per frame of each stack; depth 0 is the innermost, the allocation call). Text columns are dictionary
    encoded, so a string the pickle stores once is stored once; every row is still counted against the
    budget, since the database keeps each row's copy."""
    text_left = (budget or Budget.for_input(None)).table_text
    finder = _SiteFinder()
    sites = [finder.site(frames) for frames in stacks]
    site_text = [format_site(f) for f in sites]
    site_filename = [None if f is None else f.get("filename", "") for f in sites]
    site_name = [None if f is None else f.get("name", "") for f in sites]
    text_left -= (
        sum(map(len, site_text)) + sum(len(t) for t in site_filename if t) + sum(len(t) for t in site_name if t)
    )
    stack_ids: list[int] = []
    depths: list[int] = []
    filenames: list[str] = []
    names: list[str] = []
    lines: list[int | None] = []
    for stack_id, frames in enumerate(stacks):
        stack_ids.extend([stack_id] * len(frames))
        depths.extend(range(len(frames)))
        for frame in frames:
            filename, function = frame.get("filename", ""), frame.get("name", "")
            text_left -= len(filename) + len(function)
            filenames.append(filename)
            names.append(function)
            lines.append(_int_or_none(frame.get("line")))
        if text_left < 0:
            raise InputError(
                name,
                "not a PyTorch memory snapshot: its stacks repeat more frame text than the file's size allows "
                f"(over {(budget or Budget.for_input(None)).table_text} characters, every row counted)",
            )
    stacks_out = pa.table(
        {
            "stack_id": pa.array(range(len(stacks)), pa.int32()),
            "frame_count": pa.array([len(f) for f in stacks], pa.int32()),
            "site": _dictionary(site_text),
            "site_filename": _dictionary(site_filename),
            "site_name": _dictionary(site_name),
            "site_line": pa.array([None if f is None else _int_or_none(f.get("line")) for f in sites], pa.int64()),
        }
    )
    frames_out = pa.table(
        {
            "stack_id": pa.array(stack_ids, pa.int32()),
            "depth": pa.array(depths, pa.int32()),
            "filename": _dictionary(filenames),
            "name": _dictionary(names),
            "line": pa.array(lines, pa.int64()),
        }
    )
    return stacks_out, frames_out


class _SiteFinder:
    """site_frame with each file name and function name classified once (by the identity of the string: a
    name shared by many frames is one object), so finding the sites costs what the distinct names hold."""

    def __init__(self) -> None:
        self._files: dict[int, tuple[str, bool, bool, bool]] = {}
        self._names: dict[int, tuple[str, bool]] = {}

    def _file(self, frame: Frame) -> tuple[bool, bool, bool]:
        """(is a Python file, is plumbing, is C++ noise) of the frame's file name."""
        filename = frame.get("filename", "")
        known = self._files.get(id(filename))
        if known is None:
            known = (
                filename,  # held, so that the id stays this string's
                filename.endswith(".py"),
                any(part in filename for part in PLUMBING_FILES),
                any(f in filename for f in _CPP_NOISE_FILES),
            )
            self._files[id(filename)] = known
        return known[1], known[2], known[3]

    def _noise_name(self, frame: Frame) -> bool:
        function = frame.get("name", "")
        known = self._names.get(id(function))
        if known is None:
            known = (function, any(n in function for n in _CPP_NOISE_NAMES))
            self._names[id(function)] = known
        return known[1]

    def site(self, frames: Sequence[Frame]) -> Frame | None:
        """The same frame as site_frame(frames)."""
        first_python = None
        for frame in frames:
            python, plumbing, _noise = self._file(frame)
            if python:
                if not plumbing:
                    return frame
                if first_python is None:
                    first_python = frame
        if first_python is not None:
            return first_python
        for frame in frames:
            if not self._file(frame)[2] and not self._noise_name(frame):
                return frame
        return frames[0] if frames else None


def _dictionary(values: list[str | None]) -> pa.DictionaryArray:
    """A dictionary-encoded text column: each distinct value stored once."""
    codes: dict[str | None, int] = {}
    indices = [codes.setdefault(v, len(codes)) for v in values]
    dictionary = [v for v in codes if v is not None]
    if len(dictionary) != len(codes):  # nulls are a null index, not a dictionary entry
        null = codes[None]
        indices = [None if i == null else i - (i > null) for i in indices]
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(dictionary, pa.string()))


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
