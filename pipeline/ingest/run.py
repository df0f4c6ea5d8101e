"""`oomlab ingest`: every input file through detect -> parse -> normalize -> load, one transaction per file."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from ..config import IngestOptions
from ..errors import EmptyInputError, FastPathRefused, OomlabError, stop_if_asked
from ..load import tables as load
from ..load.reconcile import reconcile_oom_sightings
from ..load.sql import rollback, sql_text
from ..parse import detect, formats
from ..parse.compression import INPUT_ERRORS
from ..parse.facts import HASH_ALGORITHM, facts_in_background, hash_of
from ..records import FAILED, INGESTED, NOTHING_FOUND, SKIPPED, IngestReport, SourceResult
from .ahead import Ahead, Started
from .archives import archive_kind, discard, members
from .calendar import refresh_rule_occurrences
from .job import LoadJob
from .nothing_found import nothing_found_note
from .paths import InputFile, total_bytes
from .plausible import clock_note, implausible_time
from .progress import Progress, ReadPosition, polling


def ingest_files(
    con: duckdb.DuckDBPyConnection,
    files: list[InputFile],
    options: IngestOptions,
    progress: Progress | None = None,
    ahead: Ahead | None = None,
) -> IngestReport:
    """Ingest files (`paths.expand_paths`) into the open database; one failure never stops the others.
    `ahead` holds the work on the first file started before (`ahead.start_first`)."""
    wrong_at = implausible_time(options.at, "--at")
    if wrong_at is not None:  # stamped on every printout without a time of its own: refuse it once, up front
        raise OomlabError(wrong_at)
    report = IngestReport()
    if progress is not None and not progress.begin(total_bytes(files)):
        progress = None  # too little to follow: no polling thread either
    for file in files:
        if file.skip:
            report.results.append(SourceResult(file.path, SKIPPED, message=file.skip))
            continue
        if file.error:
            report.results.append(SourceResult(file.path, FAILED, message=f"{file.path}: {file.error}"))
            continue
        archive = archive_kind(file.path)
        if archive is not None:
            report.results.extend(_ingest_archive(con, file.path, archive, options, progress))
            continue
        started = ahead.for_path(file.path) if ahead is not None else None
        report.results.append(_ingest_followed(con, file, options, started, progress))
    if any(r.status == INGESTED for r in report.results):
        refresh_rule_occurrences(con)  # new data or new rules: runs of recurring jobs cover it all
        reconcile_oom_sightings(con)  # new sightings may be of OOMs other files saw: one event per real OOM
        note = clock_note(con.execute(sql_text("select_data_range")).fetchall()[0][1])
        if note is not None:
            report.notes.append(note)
    return report


def _ingest_followed(
    con: duckdb.DuckDBPyConnection,
    file: InputFile,
    options: IngestOptions,
    started: Started | None,
    progress: Progress | None,
    stored_as: str | None = None,
) -> SourceResult:
    """`ingest_file`, its reading followed by the progress bar when there is one. A stop asked for (SIGTERM)
    while the file is read ends the run, whatever error DuckDB made of it: never a failure of this file
    followed by the next one."""
    with _stop_comes_first():
        if progress is None:
            return ingest_file(con, file.path, options, started, stored_as=stored_as)
        progress.start(file.path, file.size)
        position = ReadPosition()
        with polling(con, progress, position):
            result = ingest_file(con, file.path, options, started, position, stored_as=stored_as)
        progress.finish()
        return result


@contextmanager
def _stop_comes_first() -> Iterator[None]:
    """Raise the stop (errors.stop_if_asked) in place of whatever the block ended with, when one was asked."""
    try:
        yield
    except BaseException:
        stop_if_asked()
        raise
    stop_if_asked()


def _ingest_archive(
    con: duckdb.DuckDBPyConnection, path: str, kind: str, options: IngestOptions, progress: Progress | None
) -> Iterator[SourceResult]:
    """Each member of an archive as a source of its own, known by `archive/member` (stored under the archive's
    absolute path and the member's name, so a second run finds it ingested)."""
    archive = str(Path(path).resolve())
    for member in members(path, kind):
        if member.skip is not None:
            yield SourceResult(member.name, SKIPPED, message=member.skip)
        elif member.error is not None or member.path is None:
            yield SourceResult(member.name, FAILED, message=f"{member.name}: {member.error}")
        else:
            stored = archive + member.name[len(path) :]
            result = _ingest_followed(con, InputFile(member.path, member.size), options, None, progress, stored)
            discard(member)
            yield replace(result, path=member.name, message=result.message.replace(member.path, member.name))


def ingest_file(
    con: duckdb.DuckDBPyConnection,
    path: str,
    options: IngestOptions,
    started: Started | None = None,
    position: ReadPosition | None = None,
    stored_as: str | None = None,
) -> SourceResult:
    """One file in one transaction: all of its rows, or none of them. `started`: the work on it under way;
    `position`: where a loader reports how far it has read; `stored_as`: the path the source is recorded under
    when not the file's own (an archive member's copy)."""
    abspath = stored_as or str(Path(path).resolve())
    facts = started.facts if started is not None else None
    try:
        before = FileState.of(path)
        size = before.size
        algorithm = load.known_file(con, abspath, size)
        if algorithm is not None:  # likely a re-run: hash first, skip without work
            current = facts is not None and algorithm == HASH_ALGORITHM
            digest = facts.result().content_hash if current else hash_of(path, algorithm)  # type: ignore[union-attr]
            duplicate = load.source_with_hash(con, digest, algorithm)
            if duplicate and not _relabelled(con, duplicate, abspath, options, path):
                if algorithm != HASH_ALGORITHM and duplicate == abspath:  # hashed by an earlier version
                    # the digest of this version: hashed beside the work already when facts are under way
                    fresh = facts.result().content_hash if facts is not None else hash_of(path, HASH_ALGORITHM)
                    load.upgrade_hash(con, abspath, fresh)
                return SourceResult(path, SKIPPED, message=f"already ingested as {duplicate}")
        return _ingest_new(con, path, abspath, before, options, started, position)
    except EmptyInputError as exc:
        return SourceResult(path, SKIPPED, message=exc.message)
    except OomlabError as exc:
        return SourceResult(path, FAILED, message=exc.message)
    except OSError as exc:
        return SourceResult(path, FAILED, message=f"{path}: {exc.strerror or exc or type(exc).__name__}")
    except duckdb.Error as exc:  # input DuckDB could not digest: report it, keep going with the rest
        return SourceResult(path, FAILED, message=f"{path}: {str(exc).splitlines()[0]}")
    except INPUT_ERRORS as exc:  # a cut stream, nesting past the stack, text that is no text: this file's alone
        return SourceResult(path, FAILED, message=f"{path}: {_input_error(exc)}")


def _input_error(exc: BaseException) -> str:
    """One line for an error reading an input, with what to check."""
    if isinstance(exc, EOFError):
        return f"the compressed stream ends early ({exc}): the file was cut while it was written or copied"
    if isinstance(exc, RecursionError):
        return "nested deeper than can be read (a JSON array or object inside thousands of others)"
    if isinstance(exc, MemoryError):
        return "too large to read in the memory this machine has"
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class FileState:
    """What tells that a file changed while it was read: its size, modification time and inode. A log rotated
    with copytruncate, or still being written, differs after the read from before it."""

    size: int
    mtime_ns: int
    inode: int
    device: int

    @classmethod
    def of(cls, path: str) -> FileState:
        stat = os.stat(path)
        return cls(stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_dev)

    def changed(self, path: str) -> str | None:
        """Why `path` is not the file this state was taken of any more; None when it is."""
        try:
            now = FileState.of(path)
        except OSError as exc:
            return f"it went away while it was read ({exc.strerror or exc})"
        if now == self:
            return None
        if (now.inode, now.device) != (self.inode, self.device):
            return "it was replaced by another file while it was read (rotated?)"
        sizes = f"{self.size:,} bytes before, {now.size:,} after"
        return f"it changed while it was read ({sizes}: rotated, or still being written?)"


def _relabelled(
    con: duckdb.DuckDBPyConnection, duplicate: str, abspath: str, options: IngestOptions, path: str
) -> bool:
    """Whether an unchanged file is ingested again under other labels (--instance, --model-version, --tag):
    then its rows are loaded anew with the new ones rather than skipped with the old."""
    if duplicate != abspath:
        return False
    return load.labels_of(con, abspath) != json.loads(json.dumps(options.labels_for(path), sort_keys=True))


def _ingest_new(
    con: duckdb.DuckDBPyConnection,
    path: str,
    abspath: str,
    before: FileState,
    options: IngestOptions,
    started: Started | None,
    position: ReadPosition | None,
) -> SourceResult:
    # the first file's kind was detected, and its text search started, before the loop (ingest/ahead.py)
    if started is not None:
        kind, facts, search = started.kind.result(), started.facts, started.search
    else:  # hashing (and, for request logs, line counting) runs beside the reading
        kind, search = detect.detect_kind(path, options.fields), None
        facts = facts_in_background(path, count_lines=kind in formats.LINE_ORIENTED)
    job = LoadJob(con, Path(path), kind, -1, options, facts, position, robust=False, search=search)
    try:
        return _ingest_in_transaction(job, abspath, before)
    except FastPathRefused:
        stop_if_asked()  # the fast path failed because a stop landed in it: no second try
        return _ingest_in_transaction(replace(job, robust=True), abspath, before)


def _ingest_in_transaction(job: LoadJob, abspath: str, before: FileState) -> SourceResult:
    """One file in one transaction: all of its rows, or none of them, by its format's loader (parse/formats.py;
    the loaders are imported when a file needs them: the text scanner brings polars and numpy, the snapshot
    reader its own modules, and a run over request logs needs neither). A file that changed while it was read
    stores nothing: its rows and its hash may be of different contents, and the next run reads it again."""
    con, path, kind, options = job.con, str(job.path), job.kind, job.options
    con.execute("BEGIN TRANSACTION")
    try:
        load.remove_sources(con, load.source_ids_for_path(con, abspath))
        source_id = load.next_source_id(con)
        rows, rejects = _load(replace(job, source_id=source_id))
        content_hash = job.facts.result().content_hash
        changed = before.changed(path)
        if changed is not None:
            rollback(con)
            return SourceResult(path, FAILED, kind, message=f"{path}: {changed}; nothing stored, read it again later")
        duplicate = _copy_of(con, content_hash, kind, options)
        if duplicate:
            rollback(con)
            return SourceResult(path, SKIPPED, kind, message=_duplicate_message(con, abspath, duplicate))
        found_nothing = rows == 0 and rejects == 0
        # what the loader said of the file stays beside a nothing-found note (a log in envelopes: what it held)
        said = [nothing_found_note(job.path, kind)] if found_nothing else []
        # once each: a log in envelopes reads each device's streams as a text log, and each may say the same
        note = "; ".join(dict.fromkeys(said + job.notes)) or None
        size = before.size
        load.insert_source(
            con,
            load.SourceRow(source_id, abspath, content_hash, kind, rows, rejects, size, options.labels_for(path), note),
        )
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        raise
    samples = _reject_samples(con, path, source_id) if rejects else []
    status = NOTHING_FOUND if found_nothing else INGESTED
    return SourceResult(path, status, kind, rows, rejects, message=note or "", reject_samples=samples)


def _load(job: LoadJob) -> tuple[int, int]:
    """Rows and rejects of one file, by its format's loader."""
    return formats.BY_NAME[job.kind].load()(job)


def _copy_of(con: duckdb.DuckDBPyConnection, content_hash: str, kind: str, options: IngestOptions) -> str | None:
    """The source this file's content is already loaded as, if any. A crontab or a systemd timer names no host: the
    same one given for another host (--instance) is that host's schedule, not a copy (a fleet's hosts often share
    one)."""
    if kind in (formats.CRONTAB, formats.SYSTEMD_TIMER) and options.instance:
        return load.source_with_hash_on(con, content_hash, options.instance)
    return load.source_with_hash(con, content_hash)


def _duplicate_message(con: duckdb.DuckDBPyConnection, abspath: str, duplicate: str) -> str:
    """A file whose content another source already holds is not loaded twice; if it had been ingested with
    other content before, those rows are stale now and are removed (in a transaction of their own)."""
    earlier = load.source_ids_for_path(con, abspath)
    if not earlier:
        return f"already ingested as {duplicate}"
    con.execute("BEGIN TRANSACTION")
    try:
        load.remove_sources(con, earlier)
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        raise
    return f"its content changed to that of {duplicate}, already ingested: the rows of its earlier content were removed"


def _reject_samples(con: duckdb.DuckDBPyConnection, path: str, source_id: int, limit: int = 5) -> list[str]:
    """The first rejects of a source as one-line messages naming file, line and reason."""
    rows = con.execute(
        "SELECT line, reason FROM rejects WHERE source_id = $source_id ORDER BY line NULLS FIRST LIMIT $limit",
        {"source_id": source_id, "limit": limit},
    ).fetchall()
    return [f"{path}:{line}: {reason}" if line is not None else f"{path}: {reason}" for line, reason in rows]
