"""Byte-for-byte reproducible gzip output, and compression levels by data size."""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from pathlib import Path


def write_gzip(path: Path, chunks: Iterable[bytes], level: int) -> int:
    """Write `chunks` gzip'd to `path` with no name and mtime 0 in the header (the same bytes every run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        open(path, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=level, mtime=0) as packed,
    ):
        for chunk in chunks:
            packed.write(chunk)
    return path.stat().st_size


def write_text(path: Path, text: str) -> int:
    """A small plain-text file with Unix newlines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path.stat().st_size
