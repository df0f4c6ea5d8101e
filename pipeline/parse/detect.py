"""Tell what a file holds from its content, not its name."""

from __future__ import annotations

from pathlib import Path

from ..errors import EmptyInputError, InputError
from ..fields import FIELDS, Field
from .compression import open_binary, read_head
from .formats import TEXT, recognised
from .recognise import Head


def detect_kind(path: str | Path, fields: tuple[Field, ...] = FIELDS) -> str:
    """The kind of input at `path` (the first format of parse/formats.py that recognises its head); raises
    InputError for empty, binary or unreadable files."""
    head = _head(path)
    if not head.strip():
        raise EmptyInputError(str(path), "empty file, nothing to ingest")
    # utf-8-sig: a byte-order mark (Windows editors and exporters write one) is no part of the first line
    fmt = recognised(Head(head, head.decode("utf-8-sig", errors="replace"), fields))
    if fmt.name == TEXT and _is_binary(head):  # a stray control byte inside a log is not binary content
        raise InputError(str(path), "binary content that is neither a snapshot pickle nor Parquet")
    return fmt.name


HEAD_BYTES = 64 << 10  # what the kind is told from: the first lines of any log, however wide its rows


def _head(path: str | Path) -> bytes:
    """The file's first HEAD_BYTES; when its first line is longer than that (a request log whose first record
    holds a whole prompt, say), that line's start, a line end, and the HEAD_BYTES after the line: the head then
    reads as a cut first line followed by whole ones, and the kind is told from those."""
    try:
        head = read_head(path, HEAD_BYTES)
        if len(head) == HEAD_BYTES and b"\n" not in head:
            return head + b"\n" + _after_first_line(path)
        return head
    except (OSError, EOFError, ValueError) as exc:  # corrupt gzip/xz/zstd streams raise these
        raise InputError(str(path), f"cannot read: {exc}") from exc


def _after_first_line(path: str | Path) -> bytes:
    """Up to HEAD_BYTES after the file's first line end (none without one), read through in 1 MiB pieces: a line
    of any length costs one pass over it, never its size in memory."""
    with open_binary(path) as stream:
        while piece := stream.read(1 << 20):
            end = piece.find(b"\n")
            if end >= 0:
                rest = piece[end + 1 :]
                return rest[:HEAD_BYTES] if len(rest) >= HEAD_BYTES else rest + stream.read(HEAD_BYTES - len(rest))
    return b""


def _is_binary(head: bytes) -> bool:
    """A NUL byte or more than 10% control bytes (besides tab, CR, LF, ESC) at the start means binary."""
    sample = head[:8192]
    control = sum(1 for b in sample if b < 32 and b not in (9, 10, 13, 27))
    return b"\x00" in sample[:512] or control > len(sample) * 0.1
