"""Load an untrusted pickle that may only hold plain data: every global it names is refused, nothing runs."""

from __future__ import annotations

import _compat_pickle
import gc
import io
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ...errors import InputError, UnsafePickleError
from ..compression import DECOMPRESSION_ERRORS, READ_ERRORS, compression_of, open_binary, read_head
from .bounded_read import CHECK_READS_ABOVE, CheckedStream, DecompressedRemaining, MemoryGuard, file_remaining
from .limits import bounded_text

try:  # the compiled reader, built with the wheel (hatch_build.py) where a C compiler was found
    from . import _stream
except ImportError:
    _stream = None

# The streaming reader hands larger objects to the full reader: a snapshot's strings are file names and
# function names (the longest in the real captures is 1,594 characters), and CheckedStream checks reads
# above this size against the input, which this reader would bypass.
MAX_STREAMED_OBJECT = CHECK_READS_ABOVE
# on_batch(ordinal, entries, columns, bytes_read) -> per entry, the list the reader keeps in place of its frames list
TraceBatches = Callable[[int, list[Any], tuple[bytes | None, ...], int], list[Any]]


class EndRead(Exception):
    """Raised by on_batch, from the failure that ends the streaming read, where that failure is not the
    file's (the database a batch is written to, say): it reaches the caller instead of the file being read
    again whole, as any other exception of on_batch has it."""


@dataclass(frozen=True)
class StreamedPickle:
    """What the streaming reader leaves: the object without its trace entries, the (emptied) trace lists in
    the order their batches came, and the decompressed bytes read."""

    root: object
    trace_lists: list[list[Any]]
    input_bytes: int


_HINT = "a memory snapshot holds only dicts, lists, strings and numbers; do not load this file with pickle"
_HINT_CORRUPT = "the file is truncated or not a pickle; copy it again from where it was dumped"
_ZIP_MAGIC = b"PK\x03\x04"
_DETAIL_CHARS = 200


class _PlainDataUnpickler(pickle.Unpickler):
    """The C unpickler with every way to reach code closed: globals, extensions and persistent ids."""

    def __init__(self, stream: BinaryIO, path: str) -> None:
        super().__init__(stream)
        self._path = path

    def find_class(self, module: str, name: str) -> object:
        """Refuse every global; EXT opcodes and STACK_GLOBAL also end up here."""
        module, name = (bounded_text(part, _DETAIL_CHARS) for part in python3_name(module, name))
        raise UnsafePickleError(
            self._path, f"refusing to load: the pickle names the global {module}.{name}", hint=_HINT
        )

    def persistent_load(self, pid: object) -> object:
        """Persistent ids need code from the writer (torch.save uses them); refuse them too."""
        raise UnsafePickleError(
            self._path,
            f"refusing to load: the pickle uses a persistent id ({type(pid).__name__})",
            hint=_HINT,
        )


def python3_name(module: str, name: str) -> tuple[str, str]:
    """The Python 3 name of a global written by protocol 0-2 in Python 2 spelling (`__builtin__.eval`)."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC: plain data has no cycles, and scanning millions of new dicts triples load time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_plain_pickle(path: str | Path) -> object:
    """The object in the (plain, gzip, xz or zstd) pickle at `path`, refusing anything but plain data."""
    return load_plain_pickle_sized(path)[0]


def load_plain_pickle_sized(path: str | Path) -> tuple[object, int]:
    """`load_plain_pickle`, and how many decompressed bytes the pickle took (what bounds later work)."""
    name = str(path)
    try:
        with _checked_input(path) as checked:
            return _PlainDataUnpickler(checked, name).load(), checked.position
    except InputError:
        raise
    except Exception as exc:
        raise InputError(name, _describe_failure(exc, compression_of(path)), hint=_HINT_CORRUPT) from exc


def stream_plain_pickle(
    path: str | Path, on_batch: TraceBatches, int_keys: tuple[str, ...] = ()
) -> StreamedPickle | None:
    """The pickle at `path` read by the compiled streaming reader (parse/snapshot/_stream.c): the entries of
    each trace list go to `on_batch(ordinal, entries, columns, bytes_read)` as they are read, instead of into
    memory, `columns` holding per key of `int_keys` the entries' values as int64 bytes (None where one is
    missing or not an int64); it returns, per entry, a list equal to the entry's frames for the reader to
    keep (a later entry may name the same list). None where that reader is not built, or declines the file
    (anything but plain data, a corrupt stream, a trace entry referenced twice): the caller then reads it
    with `load_plain_pickle_sized`, whose messages say what is wrong. An InputError raised by `on_batch` or
    by the input, and an EndRead raised by `on_batch`, end the read."""
    if _stream is None:
        return None
    try:
        with _checked_input(path) as checked:
            root, trace_lists = _stream.read(
                checked,
                lambda ordinal, entries, columns: on_batch(ordinal, entries, columns, checked.position),
                MAX_STREAMED_OBJECT,
                int_keys,
            )
            return StreamedPickle(root, trace_lists, checked.position)
    except (InputError, EndRead):
        raise
    except Exception:  # why: the full reader reads the file again and names what is wrong
        return None


@contextmanager
def _checked_input(path: str | Path) -> Iterator[CheckedStream]:
    """The decompressed pickle at `path` as a CheckedStream, read under the memory guard with the GC paused;
    an empty file, a zip archive and an unreadable file are one-line InputErrors."""
    name = str(path)
    size = _check_not_empty(path)
    with open_binary(path) as stream, gc_paused(), MemoryGuard() as guard:
        _refuse_known_non_pickles(stream, name)
        remaining = file_remaining(size) if compression_of(path) is None else DecompressedRemaining(path)
        with CheckedStream(stream, name, remaining, guard) as checked:
            yield checked


def read_start(path: str | Path, size: int) -> bytes:
    """The first `size` decompressed bytes of a snapshot file (to tell pickle from JSON); a file that is empty,
    unreadable or cut off within them is the same one-line InputError `load_plain_pickle` gives."""
    name = str(path)
    _check_not_empty(path)
    try:
        return read_head(path, size)
    except READ_ERRORS as exc:
        raise InputError(name, _describe_failure(exc, compression_of(path)), hint=_HINT_CORRUPT) from exc


def loads_plain_pickle(data: bytes, name: str = "<bytes>") -> object:
    """The object in pickle bytes `data`, with the same refusals as `load_plain_pickle`."""
    if not data:
        raise InputError(name, "empty input: no pickle data")
    try:
        with (
            gc_paused(),
            MemoryGuard() as guard,
            CheckedStream(io.BytesIO(data), name, file_remaining(len(data)), guard) as checked,
        ):
            return _PlainDataUnpickler(checked, name).load()
    except InputError:
        raise
    except Exception as exc:
        raise InputError(name, _describe_failure(exc, None), hint=_HINT_CORRUPT) from exc


def _check_not_empty(path: str | Path) -> int:
    """An empty file gets its own message rather than pickle's 'Ran out of input'; the file's size."""
    try:
        size = Path(path).stat().st_size
    except OSError as exc:
        raise InputError(str(path), f"cannot read the file: {exc.strerror or exc}") from exc
    if size == 0:
        raise InputError(str(path), "empty file: no pickle data")
    return size


def _refuse_known_non_pickles(stream: BinaryIO, name: str) -> None:
    """Name the likely mistake for a zip archive (torch.save) instead of a cryptic load-key error."""
    peek = getattr(stream, "peek", None)
    head = peek(4)[:4] if peek else b""
    if head == _ZIP_MAGIC:
        raise InputError(
            name,
            "not a pickle: a zip archive (a torch.save file?)",
            hint="dump the snapshot with torch.cuda.memory._dump_snapshot()",
        )


def failure_detail(exc: BaseException) -> str:
    """The first line of an exception's message, cut short (a message may quote the input)."""
    detail = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return detail if len(detail) <= _DETAIL_CHARS else detail[:_DETAIL_CHARS] + "..."


def _describe_failure(exc: Exception, compression: str | None) -> str:
    """One line that says what went wrong while reading, without a traceback."""
    detail = failure_detail(exc)
    if isinstance(exc, RecursionError):
        return "corrupt pickle: it nests deeper than can be walked"
    if isinstance(exc, EOFError) and "Compressed file ended" not in detail:
        return f"truncated pickle: the data ends before the pickle does ({detail})"
    if isinstance(exc, pickle.UnpicklingError) and "truncated" in detail:
        return f"truncated pickle: {detail}"
    if isinstance(exc, MemoryError):
        return "corrupt pickle: it claims more memory than a pickle of its size can hold"
    if compression and isinstance(exc, (EOFError, *DECOMPRESSION_ERRORS)):
        return f"truncated or corrupt {compression} data: {detail}"
    return f"not a readable pickle: {type(exc).__name__}: {detail}"
