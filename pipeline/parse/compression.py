"""Open a file whatever its compression (gzip, xz, zstd), detected from its magic bytes."""

from __future__ import annotations

import codecs
import gzip
import io
import lzma
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

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
# What reading one input can raise besides oomlab's own errors: the reads above, text that is no text, nesting
# deeper than the interpreter's stack (a 100,000-deep JSON array) and an input too large for memory. Each is that
# file's failure, said in one line; the run goes on with the other files.
INPUT_ERRORS: tuple[type[BaseException], ...] = (*READ_ERRORS, UnicodeError, RecursionError, MemoryError)

_MAGIC: dict[str, bytes] = {
    "gzip": b"\x1f\x8b",
    "xz": b"\xfd7zXZ\x00",
    "zstd": b"\x28\xb5\x2f\xfd",
}


# Text saved as UTF-16 with its byte-order mark (PowerShell's `>`, Notepad's "Unicode"): every reader takes it as
# it takes a compressed file, through a stream that turns it into UTF-8 (`_Utf16ToUtf8`). Its ASCII markers sit
# between NUL bytes, so read as it is it would hold no OOM message, no field name, nothing.
UTF16 = "utf-16"
# Each byte-order mark with the newline as that byte order writes it: a log has line ends, and a byte-order mark
# alone is two bytes any binary file may start with (an FF FE followed by no UTF-16 newline is read as it is).
_UTF16_NEWLINES = ((b"\xff\xfe", b"\n\x00"), (b"\xfe\xff", b"\x00\n"))
# How much of a file's start is looked at for its compression and, for UTF-16, a line end.
HEAD_BYTES = 64 << 10


def detect_compression(head: bytes) -> str | None:
    """The compression whose magic starts `head` (or `utf-16` for UTF-16 text: its byte-order mark and a line end
    in that byte order), or None for an uncompressed file."""
    for name, magic in _MAGIC.items():
        if head.startswith(magic):
            return name
    for bom, newline in _UTF16_NEWLINES:
        if head.startswith(bom) and _at_even_offset(head, newline):
            return UTF16
    return None


def _at_even_offset(head: bytes, pair: bytes) -> bool:
    """Whether `pair` occurs at an even offset of `head` (where a UTF-16 code unit starts)."""
    at = head.find(pair)
    while at >= 0:
        if at % 2 == 0:
            return True
        at = head.find(pair, at + 1)
    return False


def _head(handle: BinaryIO) -> bytes:
    """The bytes `detect_compression` needs: the 8 of a magic number, and more (up to HEAD_BYTES) only when they
    start with a UTF-16 byte-order mark, whose line end must be looked for (every file's kind asks this)."""
    head = handle.read(8)
    if head.startswith(tuple(bom for bom, _ in _UTF16_NEWLINES)):
        head += handle.read(HEAD_BYTES - len(head))
    return head


def compression_of(path: str | Path) -> str | None:
    """The compression of the file at `path`, read from its first bytes."""
    with open(path, "rb") as handle:
        return detect_compression(_head(handle))


@contextmanager
def open_counted(path: str | Path) -> Iterator[tuple[BinaryIO, Callable[[], int]]]:
    """A binary stream of the file's decompressed content, and a function giving how many of its stored bytes
    have been read so far (how far along a reader is, whatever the compression)."""
    with open(path, "rb") as raw:
        kind = detect_compression(_head(raw))
        raw.seek(0)
        if kind is None:
            yield raw, raw.tell
            return
        if kind == "gzip":
            stream: BinaryIO = fast_gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
        elif kind == "xz":
            stream = lzma.LZMAFile(raw)  # type: ignore[assignment]  # noqa: SIM115 - closed below
        elif kind == UTF16:
            stream = io.BufferedReader(_Utf16ToUtf8(raw, close_raw=False), _CHUNK)
        else:
            stream = _zstd_reader(raw, close_raw=False)
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
        return _zstd_reader(open(path, "rb"), close_raw=True)
    if kind == UTF16:
        return io.BufferedReader(_Utf16ToUtf8(open(path, "rb"), close_raw=True), _CHUNK)
    return open(path, "rb")


def read_head(path: str | Path, size: int = 65536) -> bytes:
    """Up to `size` decompressed bytes from the start of the file."""
    with open_binary(path) as handle:
        return handle.read(size)


def _zstd_reader(raw: BinaryIO, *, close_raw: bool) -> BinaryIO:
    """A buffered zstd stream (readline, iteration) that ends in EOFError at a truncated frame."""
    return io.BufferedReader(_StrictZstd(raw, close_raw), _CHUNK)


_CHUNK = 1 << 20
_TRUNCATED = "Compressed file ended before the end-of-stream marker was reached"


class _StrictZstd(io.RawIOBase):
    """zstd frames decoded one after another. zstandard's own stream reader ends quietly where a file was cut
    off, so a truncated file would read as a shorter (or empty) one; this raises EOFError there instead, with
    the message gzip and xz give."""

    def __init__(self, raw: BinaryIO, close_raw: bool) -> None:
        self._raw = raw
        self._close_raw = close_raw
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._in_frame = False  # input fed to the current frame that has not reached its end yet
        self._out = b""
        self._at = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        """Copy decoded bytes into `buffer`, decoding more input when none is pending; 0 at the end."""
        while self._at >= len(self._out):
            chunk = self._raw.read(_CHUNK)
            if not chunk:
                if self._in_frame:
                    raise EOFError(_TRUNCATED)
                return 0
            self._out, self._at = self._decode(chunk), 0
        count = min(len(buffer), len(self._out) - self._at)
        buffer[:count] = self._out[self._at : self._at + count]
        self._at += count
        return count

    def _decode(self, data: bytes) -> bytes:
        """Decode `data`, starting a new frame where one ends (files may hold several)."""
        parts = []
        while data:
            if self._frame.eof:
                self._frame = zstandard.ZstdDecompressor().decompressobj()
            parts.append(self._frame.decompress(data))
            self._in_frame = not self._frame.eof
            data = self._frame.unused_data if self._frame.eof else b""
        return b"".join(parts)

    def close(self) -> None:
        if self._close_raw:
            self._raw.close()
        super().close()


class _Utf16ToUtf8(io.RawIOBase):
    """UTF-16 text (the byte-order mark says which end) read as UTF-8 bytes, a chunk at a time; a byte sequence
    that is no UTF-16 raises UnicodeDecodeError, that file's one-line failure."""

    def __init__(self, raw: BinaryIO, close_raw: bool) -> None:
        super().__init__()
        self._raw, self._close_raw = raw, close_raw
        self._decoder = codecs.getincrementaldecoder("utf-16")()
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._raw.read(_CHUNK)
            self._pending = self._decoder.decode(chunk, final=not chunk).encode("utf-8")
            if not chunk:
                break
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def close(self) -> None:
        if self._close_raw and not self.closed:
            self._raw.close()
        super().close()
