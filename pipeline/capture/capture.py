"""Wrap a request handler: one JSON line per request with its memory counters, and at an OOM the allocator's
own numbers, the verbatim message and optionally a snapshot; the OOM is then re-raised."""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ..fields import FIELD_NAMES
from .line import ERROR_LIMIT, LineEncoder
from .memory import MemoryApi, OomWatch, cuda_memory, torch_oom_errors
from .snapshot import OomSnapshots, SnapshotPolicy
from .writer import Opener, ReportOnce, RotatingWriter

F = TypeVar("F", bound=Callable[..., Any])
Numbers = list[tuple[str, object]]

# The handler arguments a decorated handler's request fields are read from, by name.
REQUEST_ARGUMENTS = ("request_id", "batch_size", "input_sequence_length", "output_sequence_length")
_perf_ns = time.perf_counter_ns
_time_ns = time.time_ns


def environment_alloc_conf() -> str | None:
    """The allocator configuration this process was started with, as PyTorch reads it: PYTORCH_ALLOC_CONF (2.9 and
    later), else PYTORCH_CUDA_ALLOC_CONF; None when neither is set."""
    for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"):
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def file_label(instance: str) -> str:
    """The instance as the first part of a file name: `oomlab ingest` labels a file with the name up to its
    first dot, so dots (and characters file systems dislike) become dashes."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", instance).strip("-") or "instance"


class Request:
    """One request being measured. Inside the `with`, set `output_sequence_length` once it is known,
    `status` to log something other than ok / oom / error, or entries of `extra` (kept by ingest as is)."""

    __slots__ = (
        "_before",
        "_capture",
        "_t0",
        "_ts",
        "batch_size",
        "extra",
        "input_sequence_length",
        "output_sequence_length",
        "request_id",
        "status",
    )

    def __init__(
        self,
        capture: Capture,
        request_id: object,
        batch_size: object,
        input_sequence_length: object,
        output_sequence_length: object,
        extra: dict[str, object] | None,
    ) -> None:
        self._capture = capture
        self.request_id = request_id
        self.batch_size = batch_size
        self.input_sequence_length = input_sequence_length
        self.output_sequence_length = output_sequence_length
        self.extra = extra
        self.status: str | None = None
        self._ts = self._t0 = 0
        self._before: tuple[int, int] | None = None

    def __enter__(self) -> Request:
        self._capture._begin(self)
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> bool:
        self._capture._end(self, exc)
        return False  # the handler's exception, an OOM included, goes on to the caller


class Capture:
    """Logs every request of one process and GPU as JSON Lines under `directory`.

    `memory`: "auto" reads torch.cuda's allocator of `gpu_index` (default: the current device) when torch
    and CUDA are there, and logs status and latency only when not; None forces that; any `MemoryApi`
    (a fake in tests) is used as given. `snapshots`: True or a `SnapshotPolicy` dumps a memory snapshot at
    an OOM (history recording costs the allocator a few microseconds per allocation). `alloc_conf`: the
    allocator configuration written into every line (`alloc_conf`), so that the findings never advise what is
    already on: "auto" reads PYTORCH_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF, from the environment; a string
    is written as given (a process that changes the settings at run time); None writes none.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        instance: str | None = None,
        model_version: str | None = None,
        gpu_index: int | None = None,
        memory: MemoryApi | str | None = "auto",
        snapshots: SnapshotPolicy | bool = False,
        max_file_bytes: int = 16 << 20,
        max_files: int | None = 64,
        flush_interval_s: float = 1.0,
        opener: Opener | None = None,
        alloc_conf: str | None = "auto",
    ) -> None:
        self.directory = Path(directory)
        self.instance = instance or socket.gethostname().split(".")[0]
        self.model_version = model_version
        self.memory: MemoryApi | None = cuda_memory(gpu_index) if memory == "auto" else memory  # type: ignore
        self.gpu_index = gpu_index if gpu_index is not None else getattr(self.memory, "device", None)
        self.report = ReportOnce()
        self._oom_errors = self.memory.oom_errors if self.memory is not None else torch_oom_errors()
        self._total = self._device_total()
        conf = environment_alloc_conf() if alloc_conf == "auto" else alloc_conf
        self._encoder = LineEncoder(self.instance, self.gpu_index, model_version, conf)
        writer_options: dict[str, Any] = {"opener": opener} if opener is not None else {}
        self.writer = RotatingWriter(
            self.directory,
            f"{file_label(self.instance)}.requests",
            max_bytes=max_file_bytes,
            max_files=max_files,
            flush_interval_s=flush_interval_s,
            report=self.report,
            **writer_options,
        )
        self._watch = self._attach_observer()
        self.snapshots = self._start_snapshots(snapshots)
        atexit.register(self.close)

    # --- the public API -------------------------------------------------------------------------------
    def request(
        self,
        request_id: object = None,
        batch_size: object = None,
        input_sequence_length: object = None,
        output_sequence_length: object = None,
        **extra: object,
    ) -> Request:
        """A context manager measuring one request; the arguments are logged as given."""
        return Request(
            self,
            request_id,
            batch_size,
            input_sequence_length,
            output_sequence_length,
            self._checked_extra(extra) if extra else None,
        )

    def handler(self, fn: F | None = None, /, *, fields: Callable[..., Mapping[str, object]] | None = None) -> Any:
        """Decorator (sync or async): each call is one request. Its fields come from the handler's arguments
        named request_id, batch_size, input_sequence_length, output_sequence_length, or from
        `fields(*args, **kwargs)` when given."""

        def decorate(func: F) -> F:
            pick = _caller_fields(fields) if fields is not None else argument_picker(func)
            return self._wrap_async(func, pick) if inspect.iscoroutinefunction(func) else self._wrap(func, pick)

        return decorate if fn is None else decorate(fn)

    def flush(self) -> None:
        """Write the queued lines now."""
        self.writer.flush()

    def close(self) -> None:
        """Stop observing OOMs and write and close the log (also done at exit)."""
        atexit.unregister(self.close)
        if self._watch is not None and self.memory is not None:
            self.memory.detach_oom_observer(self._watch)
            self._watch = None
        self.writer.close()

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- one request ----------------------------------------------------------------------------------
    def _begin(self, req: Request) -> None:
        req._ts = _time_ns()
        memory = self.memory
        if memory is not None:
            try:
                allocated, reserved, _ = memory.counters()
                memory.reset_peak()
                req._before = (allocated, reserved)
            except Exception as exc:  # the service comes first: a broken counter costs fields, not requests
                self.report("counters", f"oomlab capture: cannot read memory counters: {exc!r}")
        req._t0 = _perf_ns()

    def _end(self, req: Request, exc: BaseException | None) -> None:
        latency_ns = _perf_ns() - req._t0
        try:
            oom = exc is not None and isinstance(exc, self._oom_errors)
            self.writer.write(self._line(req, latency_ns, exc, oom), urgent=oom)
        except Exception as err:  # never let logging replace the handler's result or exception
            self.report("line", f"oomlab capture: cannot log a request: {err!r}")

    def _line(self, req: Request, latency_ns: int, exc: BaseException | None, oom: bool) -> str:
        numbers: Numbers = [
            ("batch_size", req.batch_size),
            ("input_sequence_length", req.input_sequence_length),
            ("output_sequence_length", req.output_sequence_length),
        ]
        after = self._counters()
        if after is not None:
            before = req._before or (None, None)
            numbers += [
                ("allocated_before", before[0]),
                ("reserved_before", before[1]),
                ("allocated_after", after[0]),
                ("reserved_after", after[1]),
                ("peak_allocated", after[2]),
                ("device_total", self._total),
            ]
        error = None
        if oom:
            error = str(exc)  # verbatim: ingest parses the message's own numbers from it
            numbers += self._oom_numbers(req, error, after)
        elif exc is not None:
            error = f"{type(exc).__name__}: {exc}"[:ERROR_LIMIT]
        status = req.status or (
            "ok" if exc is None else "oom" if oom else "error" if isinstance(exc, Exception) else "cancelled"
        )
        return self._encoder.encode(req._ts, req.request_id, status, latency_ns, numbers, error, req.extra)

    def _oom_numbers(self, req: Request, message: str, after: tuple[int, int, int] | None) -> Numbers:
        """The four allocator numbers of the failure: the observer's exact ones, else the message's (rounded
        to its two decimals), else the counters read now (after unwinding freed the request's tensors)."""
        facts = self._watch.take(req._t0) if self._watch is not None else None
        if facts is not None:
            requested, free, allocated, reserved = facts.requested, facts.free, facts.allocated, facts.reserved
        else:
            requested, free, allocated, reserved = _message_numbers(message)
            if self.snapshots is not None:  # no observer saw it, so no snapshot was taken at the failure
                self.snapshots.on_oom()
        if free is None:
            free = self._device_free()
        if after is not None:
            allocated = after[0] if allocated is None else allocated
            reserved = after[1] if reserved is None else reserved
        return [
            ("requested_size", requested),
            ("available_memory", free),
            ("allocator_allocated", allocated),
            ("reserved_memory", reserved),
        ]

    # --- helpers --------------------------------------------------------------------------------------
    def _counters(self) -> tuple[int, int, int] | None:
        if self.memory is None:
            return None
        try:
            return self.memory.counters()
        except Exception as exc:
            self.report("counters", f"oomlab capture: cannot read memory counters: {exc!r}")
            return None

    def _device_total(self) -> int | None:
        try:
            return self.memory.device_total() if self.memory is not None else None
        except Exception:  # optional: the line just leaves device_total out
            return None

    def _device_free(self) -> int | None:
        try:
            return self.memory.device_free() if self.memory is not None else None
        except Exception:
            return None

    def _attach_observer(self) -> OomWatch | None:
        if self.memory is None:
            return None
        watch = OomWatch(self.memory, self.gpu_index)
        try:
            return watch if self.memory.attach_oom_observer(watch) else None
        except Exception as exc:
            self.report("observer", f"oomlab capture: no OOM observer ({exc!r}); OOM numbers come from messages")
            return None

    def _start_snapshots(self, snapshots: SnapshotPolicy | bool) -> OomSnapshots | None:
        if not snapshots or self.memory is None:
            return None
        policy = snapshots if isinstance(snapshots, SnapshotPolicy) else SnapshotPolicy()
        gpu = f".gpu{self.gpu_index}" if self.gpu_index is not None else ""
        taker = OomSnapshots(
            self.memory,
            Path(policy.directory or self.directory),
            f"{file_label(self.instance)}.oom-snapshot{gpu}",
            policy,
            self.report,
        )
        if not taker.start():
            return None
        if self._watch is not None:
            self._watch.listeners.append(taker.on_oom)  # at the failure itself, before unwinding frees memory
        return taker

    def _checked_extra(self, extra: dict[str, object]) -> dict[str, object]:
        clash = [k for k in extra if k in FIELD_NAMES]
        for name in clash:
            self.report(f"extra-{name}", f"oomlab capture: extra field {name!r} is a canonical field; not logged")
        return {k: v for k, v in extra.items() if k not in FIELD_NAMES} if clash else extra

    def _wrap(self, func: F, pick: Callable[[tuple, dict], dict]) -> F:
        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self.request(**self._picked(pick, args, kwargs)):
                return func(*args, **kwargs)

        return run  # type: ignore[return-value]

    def _wrap_async(self, func: F, pick: Callable[[tuple, dict], dict]) -> F:
        @functools.wraps(func)
        async def run(*args: Any, **kwargs: Any) -> Any:
            with self.request(**self._picked(pick, args, kwargs)):
                return await func(*args, **kwargs)

        return run  # type: ignore[return-value]

    def _picked(self, pick: Callable[[tuple, dict], dict], args: tuple, kwargs: dict) -> dict:
        try:
            return pick(args, kwargs)
        except Exception as exc:
            self.report("fields", f"oomlab capture: cannot read request fields: {exc!r}")
            return {}


def argument_picker(func: Callable[..., Any]) -> Callable[[tuple, dict], dict]:
    """Reads a handler's arguments named like request fields, by keyword or by position (worked out once)."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature: no fields
        return lambda args, kwargs: {}
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    where = [
        (p.name, i if p.kind in positional else None, None if p.default is p.empty else p.default)
        for i, p in enumerate(params)
        if p.name in REQUEST_ARGUMENTS
    ]

    def pick(args: tuple, kwargs: dict) -> dict:
        found = {}
        for name, position, default in where:
            if name in kwargs:
                found[name] = kwargs[name]
            elif position is not None and position < len(args):
                found[name] = args[position]
            else:
                found[name] = default
        return found

    return pick


def _caller_fields(fields: Callable[..., Mapping[str, object]]) -> Callable[[tuple, dict], dict]:
    return lambda args, kwargs: dict(fields(*args, **kwargs))


def _message_numbers(message: str) -> tuple[int | None, int | None, int | None, int | None]:
    """(requested, free, allocated, reserved) as the OOM message states them; Nones where it does not."""
    from ..parse.oom.message import parse_oom_message  # on the first OOM only: the parsers take 60 ms to load

    try:
        parsed = parse_oom_message(message)
    except Exception:
        parsed = None
    if parsed is None:
        return None, None, None, None
    allocated = parsed.allocated_by_pytorch_bytes
    if allocated is None:
        allocated = parsed.already_allocated_bytes  # the pre-2.1 wording
    reserved = parsed.reserved_bytes
    if reserved is None and parsed.allocated_by_pytorch_bytes is not None:
        reserved = parsed.allocated_by_pytorch_bytes + (parsed.reserved_unallocated_bytes or 0)
    return parsed.requested_bytes, parsed.free_bytes, allocated, reserved
