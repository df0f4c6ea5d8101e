"""The input files of one `oomlab ingest`: each path given, folders walked once, recursively and in order."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class InputFile:
    """One file to ingest, its size when walked, or why it cannot be read."""

    path: str
    size: int = 0
    error: str | None = None


def expand_paths(paths: list[str]) -> list[InputFile]:
    """Files under each path (directories recursively, sorted; dot files and folders skipped, since writers
    such as `oomlab.capture` name half-written files so), with their sizes, or an error for unreadable ones."""
    return [_sized(path, error) for path, error in _paths(paths)]


def total_bytes(files: list[InputFile]) -> int:
    """What a progress bar counts: the bytes of every readable file."""
    return sum(f.size for f in files if f.error is None)


def _paths(paths: list[str]) -> Iterator[tuple[str, str | None]]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from _walk(path)
        elif path.is_file():
            yield str(path), None
        else:
            yield str(path), "no such file or directory"


def _walk(root: Path) -> Iterator[tuple[str, str | None]]:
    errors: list[OSError] = []
    for folder, dirs, files in os.walk(root, onerror=errors.append):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                yield os.path.join(folder, name), None
    for err in errors:
        yield str(err.filename), f"cannot read directory: {err.strerror}"


def _sized(path: str, error: str | None) -> InputFile:
    if error is not None:
        return InputFile(path, error=error)
    try:
        return InputFile(path, os.path.getsize(path))
    except OSError as exc:
        return InputFile(path, error=exc.strerror or type(exc).__name__)
