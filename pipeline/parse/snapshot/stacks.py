"""Stack interning for snapshots, and the allocation site of a stack (first frame outside plumbing)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

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
    """Gives each distinct frames list a dense stack id; lists compare by content, shared dicts by id."""

    stacks: list[list[Frame]]
    _candidates: dict[object, list[tuple[list[Frame], int]]]

    @classmethod
    def empty(cls) -> StackInterner:
        return cls([], {})

    def intern_all(self, frame_lists: Iterable[list[Frame] | None]) -> list[int]:
        """Stack ids for `frame_lists`, in order; a missing list counts as an empty stack."""
        # A tight loop: a cheap key (identity of the innermost frame dict, and length) narrows the
        # candidates; list equality, which short-cuts on identical frame dicts, confirms. Keying on the
        # whole tuple of frame ids is 3-4x slower on a 2M-entry trace.
        out: list[int] = []
        append, get = out.append, self._candidates.get
        for frames in frame_lists:
            if not frames:
                frames = []
                key: object = None
            else:
                key = (id(frames[0]), len(frames))
            bucket = get(key)
            if bucket is not None:
                for known, stack_id in bucket:
                    if known == frames:
                        append(stack_id)
                        break
                else:
                    append(self._add(frames, key, bucket))
            else:
                append(self._add(frames, key, None))
        return out

    def _add(self, frames: list[Frame], key: object, bucket: list[tuple[list[Frame], int]] | None) -> int:
        stack_id = len(self.stacks)
        self.stacks.append(frames)
        if bucket is None:
            self._candidates[key] = [(frames, stack_id)]
        else:
            bucket.append((frames, stack_id))
        return stack_id

    def merge_equal_stacks(self) -> list[int] | None:
        """Merge stacks equal by content but not by frame identity (JSON has no sharing): keeps the first of
        each, renumbered densely, and returns the old-id -> new-id map; None when nothing was merged."""
        new_ids: dict[tuple[tuple[Any, ...], ...], int] = {}
        remap = [new_ids.setdefault(_frames_key(frames), len(new_ids)) for frames in self.stacks]
        if len(new_ids) == len(remap):
            return None
        kept: dict[int, list[Frame]] = {}
        for frames, new_id in zip(self.stacks, remap, strict=True):
            kept.setdefault(new_id, frames)
        self.stacks[:] = [kept[i] for i in range(len(new_ids))]
        self._candidates.clear()
        return remap


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


def stacks_table(stacks: Sequence[Sequence[Frame]]) -> pa.Table:
    """One row per stack: its frame count and allocation site."""
    sites = [site_frame(frames) for frames in stacks]
    return pa.table(
        {
            "stack_id": pa.array(range(len(stacks)), pa.int32()),
            "frame_count": pa.array([len(f) for f in stacks], pa.int32()),
            "site": pa.array([format_site(f) for f in sites], pa.string()),
            "site_filename": pa.array([None if f is None else str(f.get("filename")) for f in sites], pa.string()),
            "site_name": pa.array([None if f is None else str(f.get("name")) for f in sites], pa.string()),
            "site_line": pa.array([None if f is None else _int_or_none(f.get("line")) for f in sites], pa.int64()),
        }
    )


def frames_table(stacks: Sequence[Sequence[Frame]]) -> pa.Table:
    """One row per frame of each stack; depth 0 is the innermost (the allocation call)."""
    rows = [(stack_id, depth, f) for stack_id, frames in enumerate(stacks) for depth, f in enumerate(frames)]
    return pa.table(
        {
            "stack_id": pa.array([r[0] for r in rows], pa.int32()),
            "depth": pa.array([r[1] for r in rows], pa.int32()),
            "filename": pa.array([str(r[2].get("filename", "")) for r in rows], pa.string()),
            "name": pa.array([str(r[2].get("name", "")) for r in rows], pa.string()),
            "line": pa.array([_int_or_none(r[2].get("line")) for r in rows], pa.int64()),
        }
    )


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
