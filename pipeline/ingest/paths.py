"""The input files of one `oomlab ingest`: each path given, folders walked once, recursively and in order."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError


@dataclass(frozen=True)
class InputFile:
    """One file to ingest, its size when walked, or why it cannot be read."""

    path: str
    size: int = 0
    error: str | None = None
    skip: str | None = None  # why it is passed over, said in the summary (the database being written, say)


# Beside a DuckDB database: its write-ahead log, and the temporary folder or file it spills to.
_DATABASE_SIDECARS = ("", ".wal", ".tmp")


def expand_paths(paths: list[str], database: str | Path | None = None) -> list[InputFile]:
    """Files under each path (directories recursively, sorted; dot files and folders skipped, since writers
    such as `oomlab.capture` name half-written files so), with their sizes, or an error for unreadable ones. The
    `database` being written, its `.wal` and what is under its `.tmp` are passed over with the reason: a folder
    holding logs and the database beside them must not feed the database into itself."""
    own = _own_files(database)
    return [
        InputFile(path, skip=_OWN_REASON) if _is_own(path, own) else _sized(path, error)
        for path, error in _paths(paths)
    ]


_OWN_REASON = "the database this ingest writes (or its write-ahead log or spill files): never an input"


def _own_files(database: str | Path | None) -> tuple[str, ...]:
    if database is None or str(database) == ":memory:":
        return ()
    base = os.path.realpath(database)
    return tuple(base + suffix for suffix in _DATABASE_SIDECARS)


def _is_own(path: str, own: tuple[str, ...]) -> bool:
    if not own:
        return False
    real = os.path.realpath(path)
    return real in own or real.startswith(own[-1] + os.sep)


# The most files one ingest takes without --many-files. Each file is a transaction of its own (its rows, its
# sources row and its hash committed together, so a stop leaves whole files): 60-70 ms of fixed cost on the 2-core
# machine this was measured on (2,000 one-record request logs: 138 s, some 15 files a second), so 10,000 files are
# some 10 minutes of that cost alone whatever they hold, and 200,000 (one record each) would be hours.
MANY_FILES = 10_000


def check_file_count(paths: list[str], files: list[InputFile], allowed: bool) -> None:
    """UsageError, saying how to pass them, when more than MANY_FILES files are to be read from `paths` and
    `allowed` is not set (--many-files)."""
    count = sum(1 for f in files if f.error is None and f.skip is None)
    if count <= MANY_FILES or allowed:
        return
    given = paths[0] if len(paths) == 1 else f"{paths[0]} and {len(paths) - 1:,} more paths"
    raise UsageError(
        f"{given}: {count:,} files to ingest, more than {MANY_FILES:,}: each is a transaction of its own, and at "
        f"the 15 files a second a 2-core machine reads that would take {count / 15 / 60:,.0f} minutes",
        hint="join small logs of one kind and host into one file (cat host-a/*.jsonl > host-a.jsonl), or pass "
        "--many-files to read them one by one anyway",
    )


def total_bytes(files: list[InputFile]) -> int:
    """What a progress bar counts: the bytes of every readable file."""
    return sum(f.size for f in files if f.error is None)


def _paths(paths: list[str]) -> Iterator[tuple[str, str | None]]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from _walk(path)
        else:
            yield str(path), _not_a_file(str(path))


def _walk(root: Path) -> Iterator[tuple[str, str | None]]:
    errors: list[OSError] = []
    for folder, dirs, files in os.walk(root, onerror=errors.append):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                path = os.path.join(folder, name)
                yield path, _not_a_file(path)
    for err in errors:
        yield str(err.filename), f"cannot read directory: {err.strerror}"


# What a path that is not a regular file is: reading a FIFO waits for a writer forever, a device never ends.
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))  # fmt: skip


def _not_a_file(path: str) -> str | None:
    """Why `path` cannot be ingested as a file (a true reason), or None for a regular file."""
    try:
        mode = os.stat(path).st_mode  # follows symlinks
    except OSError as exc:
        if os.path.islink(path):
            return f"a symbolic link to nothing readable ({exc.strerror or type(exc).__name__})"
        return (exc.strerror or type(exc).__name__).lower()
    if stat.S_ISREG(mode):
        return _unnamed(path)
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"{kind}, not a file: nothing to read from it"


def _sized(path: str, error: str | None) -> InputFile:
    if error is not None:
        return InputFile(path, error=error)
    try:
        return InputFile(path, os.path.getsize(path))
    except OSError as exc:
        return InputFile(path, error=exc.strerror or type(exc).__name__)


def _unnamed(path: str) -> str | None:
    """Why a regular file's name cannot be kept: the database stores paths as UTF-8 text, and a name in another
    encoding (the OS hands it over with its bytes escaped) cannot be written there."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not UTF-8 text, which the database keeps paths as: rename the file"
    return None
