"""Open a file whatever its compression (gzip, xz, zstd), detected from its magic bytes."""

from __future__ import annotations

import gzip
import io
import lzma
import zlib
from pathlib import Path
from typing import BinaryIO

import zstandard

# What a damaged compressed file raises while it is read (gzip's BadGzipFile is also an OSError).
DECOMPRESSION_ERRORS: tuple[type[Exception], ...] = (gzip.BadGzipFile, lzma.LZMAError, zlib.error,
                                                     zstandard.ZstdError)
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


def open_binary(path: str | Path) -> BinaryIO:
    """A binary stream of the file's decompressed content."""
    kind = compression_of(path)
    if kind == "gzip":
        return gzip.open(path, "rb")  # type: ignore[return-value]
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
