"""The first input file's work, begun before `oomlab ingest` loads DuckDB and opens the database: its kind
(detected once, here), its facts (content hash, line count) and, for a plain text log, rg's marker search.

Loading the ingest modules and creating a new database take about 0.4 s of one core: started first, the
hash (and a request log's line count) and rg's pass over a text log run beside them instead of
after. The kind is told first (it decides whether rg starts, and whether the thread counts lines).
`api.ingest` starts it, hands it to the loop and closes it (ending a search no scan took up).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..fields import Field
from ..parse.facts import FileFacts, facts_in_background
from .paths import InputFile

if TYPE_CHECKING:
    from ..parse.text.textscan import SearchAhead


@dataclass(frozen=True)
class Started:
    """One file's work under way."""

    path: str  # as `paths.expand_paths` names the file
    kind: Future[str]  # its format's name; the detection's error, raised in the file's own turn
    facts: Future[FileFacts]
    search: SearchAhead | None  # rg's search, for a plain text log

    def close(self) -> None:
        """End the search if no scan took it up (the file turned out to be skipped, say)."""
        if self.search is not None:
            self.search.close()


@dataclass(frozen=True)
class Ahead:
    """The work started before the loop: on the first file, or on none."""

    first: Started | None = None

    def for_path(self, path: str) -> Started | None:
        """The work started on `path`, when it is the first file."""
        return self.first if self.first is not None and path == self.first.path else None

    def close(self) -> None:
        if self.first is not None:
            self.first.close()


def start_first(files: list[InputFile], fields: tuple[Field, ...]) -> Ahead:
    """Start the work on the first file to ingest, when it can be read: its kind is told here (once), rg's search
    of a text log starts at once, and the hash (with a request log's line count) in a thread."""
    if not files or files[0].error is not None or files[0].skip is not None:
        return Ahead()
    from ..errors import InputError
    from ..parse import detect, formats
    from ..parse.compression import INPUT_ERRORS

    path = files[0].path
    kind: Future[str] = Future()
    try:
        kind.set_result(detect.detect_kind(path, fields))
    except (InputError, *INPUT_ERRORS) as exc:  # the file's own turn reports it, in one line
        kind.set_exception(exc)
        return Ahead(Started(path, kind, facts_in_background(path, count_lines=False), None))
    search = _search(path) if kind.result() == formats.TEXT else None
    facts = facts_in_background(path, count_lines=kind.result() in formats.LINE_ORIENTED)
    return Ahead(Started(path, kind, facts, search))


def _search(path: str) -> SearchAhead | None:
    from .text_readers import search_text_log_ahead

    try:
        return search_text_log_ahead(path)
    except OSError:  # rg could not start on it: the scan searches it itself
        return None
