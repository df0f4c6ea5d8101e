"""`oomlab ingest`: every input file through parse -> normalize -> load, one transaction per file."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import duckdb

from ..config import IngestOptions
from ..errors import EmptyInputError, OomlabError
from ..load import tables as load
from ..parse import detect
from ..parse.facts import FileFacts, facts_in_background, sha256_of
from .ahead import Ahead
from .calendar import refresh_rule_occurrences
from .requests import FastPathRefused, ingest_structured

SKIPPED, INGESTED, FAILED = "skipped", "ingested", "failed"


@dataclass
class SourceResult:
    """What happened to one input path."""

    path: str
    status: str
    kind: str = ""
    rows: int = 0
    rejects: int = 0
    message: str = ""
    reject_samples: list[str] = field(default_factory=list)  # "file:line: reason", the first few


@dataclass
class IngestReport:
    """The outcome of one `oomlab ingest` call."""

    results: list[SourceResult] = field(default_factory=list)

    @property
    def failed(self) -> list[SourceResult]:
        return [r for r in self.results if r.status == FAILED]


def expand_paths(paths: list[str]) -> Iterator[tuple[str, str | None]]:
    """Files under each path (directories recursively, sorted), or (path, error) for unreadable ones."""
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


class Progress(Protocol):
    """Receives progress: a file starts, the running statement is `fraction` done, the file is done."""

    def start(self, path: str, size: int) -> None: ...
    def update(self, fraction: float) -> None: ...
    def finish(self) -> None: ...


class ReadPosition:
    """How far a loader that reads its file itself has got (0-1), for the progress bar: DuckDB reports its own
    progress on the files it reads. The loader writes it, the polling thread reads it."""

    __slots__ = ("fraction",)

    def __init__(self) -> None:
        self.fraction = 0.0


def ingest_paths(
    con: duckdb.DuckDBPyConnection,
    paths: list[str],
    options: IngestOptions,
    progress: Progress | None = None,
    ahead: Ahead | None = None,
) -> IngestReport:
    """Ingest files and directories into the open database; one failure never stops the others. `ahead`
    holds facts of a file started before (`ingest_ahead.start_first`)."""
    report = IngestReport()
    for path, error in expand_paths(paths):
        if error:
            report.results.append(SourceResult(path, FAILED, message=f"{path}: {error}"))
            continue
        facts = ahead.for_path(path) if ahead is not None else None
        if progress is None:
            report.results.append(ingest_file(con, path, options, facts))
            continue
        progress.start(path, _size(path))
        position = ReadPosition()
        with _polling(con, progress, position):
            report.results.append(ingest_file(con, path, options, facts, position))
        progress.finish()
    if any(r.status == INGESTED for r in report.results):
        refresh_rule_occurrences(con)  # new data or new rules: runs of recurring jobs cover it all
    return report


@contextmanager
def _polling(
    con: duckdb.DuckDBPyConnection, progress: Progress, position: ReadPosition, every: float = 0.25
) -> Iterator[None]:
    """Report progress from a thread: DuckDB's on its running statement (query_progress is thread-safe, and
    -1 when none runs), or how far the loader has read the file itself."""
    done = threading.Event()

    def poll() -> None:
        while not done.wait(every):
            fraction = max(con.query_progress() / 100, position.fraction)
            if fraction > 0:
                progress.update(fraction)

    thread = threading.Thread(target=poll, daemon=True, name="oomlab-progress")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def ingest_file(
    con: duckdb.DuckDBPyConnection,
    path: str,
    options: IngestOptions,
    facts: Future[FileFacts] | None = None,
    position: ReadPosition | None = None,
) -> SourceResult:
    """One file in one transaction: all of its rows, or none of them. `facts`: the file's, if under way;
    `position`: where a loader reports how far it has read."""
    abspath = str(Path(path).resolve())
    try:
        size = os.path.getsize(path)
        if load.known_file(con, abspath, size):  # likely a re-run: hash first, skip without work
            sha = facts.result().sha256 if facts is not None else sha256_of(path)
            duplicate = load.source_with_sha(con, sha)
            if duplicate:
                return SourceResult(path, SKIPPED, message=f"already ingested as {duplicate}")
        return _ingest_new(con, path, abspath, size, options, facts, position)
    except EmptyInputError as exc:
        return SourceResult(path, SKIPPED, message=exc.message)
    except OomlabError as exc:
        return SourceResult(path, FAILED, message=exc.message)
    except OSError as exc:
        return SourceResult(path, FAILED, message=f"{path}: {exc.strerror or exc or type(exc).__name__}")
    except duckdb.Error as exc:  # input DuckDB could not digest: report it, keep going with the rest
        return SourceResult(path, FAILED, message=f"{path}: {str(exc).splitlines()[0]}")


def _ingest_new(
    con: duckdb.DuckDBPyConnection,
    path: str,
    abspath: str,
    size: int,
    options: IngestOptions,
    facts: Future[FileFacts] | None,
    position: ReadPosition | None,
) -> SourceResult:
    kind = detect.detect_kind(path, options.fields)
    # Hashing (and, for request logs, line counting) runs beside the reading.
    if facts is None:
        facts = facts_in_background(path, count_lines=kind in detect.LINE_ORIENTED)
    try:
        return _ingest_in_transaction(con, path, abspath, size, kind, options, facts, position, robust=False)
    except FastPathRefused:
        return _ingest_in_transaction(con, path, abspath, size, kind, options, facts, position, robust=True)


def _ingest_in_transaction(
    con: duckdb.DuckDBPyConnection,
    path: str,
    abspath: str,
    size: int,
    kind: str,
    options: IngestOptions,
    facts: Future[FileFacts],
    position: ReadPosition | None,
    robust: bool,
) -> SourceResult:
    """One file in one transaction: all of its rows, or none of them."""
    con.execute("BEGIN TRANSACTION")
    try:
        load.remove_sources(con, load.source_ids_for_path(con, abspath))
        source_id = load.next_source_id(con)
        rows, rejects = _load_content(con, Path(path), kind, source_id, options, facts, position, robust)
        sha = facts.result().sha256
        duplicate = load.source_with_sha(con, sha)
        if duplicate:
            con.execute("ROLLBACK")
            return SourceResult(path, SKIPPED, kind, message=f"already ingested as {duplicate}")
        load.insert_source(
            con, load.SourceRow(source_id, abspath, sha, kind, rows, rejects, size, options.labels_for(path))
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    samples = _reject_samples(con, path, source_id) if rejects else []
    return SourceResult(path, INGESTED, kind, rows, rejects, reject_samples=samples)


def _load_content(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    kind: str,
    source_id: int,
    options: IngestOptions,
    facts: Future[FileFacts],
    position: ReadPosition | None,
    robust: bool,
) -> tuple[int, int]:
    """Rows and rejects loaded from one file of a known kind."""
    # Loaders of the other kinds are imported when a file needs them: the text scanner brings polars and
    # numpy, the snapshot reader its own modules, and a run over request logs needs neither.
    if kind == detect.TEXT:
        from .text import ingest_text_log

        return ingest_text_log(con, path, source_id, options, position)
    if kind in detect.TELEMETRY:
        from .telemetry import ingest_telemetry

        return ingest_telemetry(con, path, kind, source_id, options)
    if kind == detect.SNAPSHOT:
        from .snapshot import ingest_snapshot

        return ingest_snapshot(con, path, source_id, options)
    if kind == detect.CALENDAR:
        from .calendar import ingest_calendar

        return ingest_calendar(con, path, source_id, options)
    return ingest_structured(con, path, kind, source_id, options, facts, robust)


def _reject_samples(con: duckdb.DuckDBPyConnection, path: str, source_id: int, limit: int = 5) -> list[str]:
    """The first rejects of a source as one-line messages naming file, line and reason."""
    rows = con.execute(
        "SELECT line, reason FROM rejects WHERE source_id = ? ORDER BY line NULLS FIRST LIMIT ?", [source_id, limit]
    ).fetchall()
    return [f"{path}:{line}: {reason}" if line is not None else f"{path}: {reason}" for line, reason in rows]
