"""Open a file whatever its compression (gzip, xz, zstd), detected from its magic bytes."""

from __future__ import annotations

import gzip
import io
import lzma
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import zstandard

try:  # ISA-L's gzip reader: the same files and errors as the standard one, 2-3x faster to decompress
    from isal import igzip as fast_gzip
    from isal import isal_zlib

    _FAST_GZIP_ERRORS: tuple[type[Exception], ...] = (fast_gzip.BadGzipFile, isal_zlib.error)
except ImportError:  # a platform without its wheel (the dependency is only declared where wheels exist)
    fast_gzip = gzip  # type: ignore[no-redef]
    _FAST_GZIP_ERRORS = ()

# What a damaged compressed file raises while it is read (gzip's BadGzipFile is also an OSError).
DECOMPRESSION_ERRORS: tuple[type[Exception], ...] = (
    gzip.BadGzipFile,
    lzma.LZMAError,
    zlib.error,
    zstandard.ZstdError,
    *_FAST_GZIP_ERRORS,
)
# Everything reading a file through `open_binary` can raise that is the file's fault, not oomlab's.
READ_ERRORS: tuple[type[Exception], ...] = (OSError, EOFError, *DECOMPRESSION_ERRORS)

_MAGIC: dict[str, bytes] = {
    "gzip": b"\x1f\x8b",
    "xz": b"\xfd7zXZ\x00",
    "zstd": b"\x28\xb5\x2f\xfd",
}


def detect_compression(head: bytes) -> str | None:
    """The compression whose magic starts `head`, or None for an uncompressed file."""
    for name, magic in _MAGIC.items():
        if head.startswith(magic):
            return name
    return None


def compression_of(path: str | Path) -> str | None:
    """The compression of the file at `path`, read from its first bytes."""
    with open(path, "rb") as handle:
        return detect_compression(handle.read(8))


@contextmanager
def open_counted(path: str | Path) -> Iterator[tuple[BinaryIO, Callable[[], int]]]:
    """A binary stream of the file's decompressed content, and a function giving how many of its stored bytes
    have been read so far (how far along a reader is, whatever the compression)."""
    with open(path, "rb") as raw:
        kind = detect_compression(raw.read(8))
        raw.seek(0)
        if kind is None:
            yield raw, raw.tell
            return
        if kind == "gzip":
            stream: BinaryIO = fast_gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
        elif kind == "xz":
            stream = lzma.LZMAFile(raw)  # type: ignore[assignment]  # noqa: SIM115 - closed below
        else:
            reader = zstandard.ZstdDecompressor().stream_reader(raw, closefd=False)
            stream = io.BufferedReader(reader, 1 << 20)  # type: ignore[arg-type]
        with stream:
            yield stream, raw.tell


def open_binary(path: str | Path) -> BinaryIO:
    """A binary stream of the file's decompressed content."""
    kind = compression_of(path)
    if kind == "gzip":
        return fast_gzip.open(path, "rb")  # type: ignore[return-value]
    if kind == "xz":
        return lzma.open(path, "rb")  # type: ignore[return-value]
    if kind == "zstd":
        raw = open(path, "rb")  # noqa: SIM115 - closed with the reader
        reader = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
        return io.BufferedReader(reader, 1 << 20)  # type: ignore[arg-type]  # adds readline, iteration
    return open(path, "rb")


def read_head(path: str | Path, size: int = 65536) -> bytes:
    """Up to `size` decompressed bytes from the start of the file."""
    with open_binary(path) as handle:
        return handle.read(size)
