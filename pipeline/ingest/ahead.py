"""The first input file's facts (content hash, line count), and for a plain text log its marker search,
started before `oomlab ingest` loads DuckDB and opens the database.

Loading the ingest modules and creating a new database take about 0.4 s of one core: started first, the
hash (and a request log's line count) and rg's pass over a text log run beside them instead of after. This
module imports nothing heavy before the thread starts; the thread detects the file's kind itself.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

from ..fields import Field
from ..parse.facts import FileFacts, facts_in_background
from .paths import InputFile


@dataclass(frozen=True)
class Ahead:
    """Facts of one input file, under way."""

    path: str  # as `paths.expand_paths` names the file
    facts: Future[FileFacts]

    def for_path(self, path: str) -> Future[FileFacts] | None:
        """The facts when `path` is this file."""
        return self.facts if path == self.path else None


def start_first(files: list[InputFile], fields: tuple[Field, ...]) -> Ahead | None:
    """Start the facts of the first file to ingest, when it can be read."""
    if not files or files[0].error is not None or files[0].skip is not None:
        return None
    path = files[0].path

    def line_oriented() -> bool:
        from ..parse import detect

        return detect.detect_kind(path, fields) in detect.LINE_ORIENTED

    ahead = Ahead(path, facts_in_background(path, count_lines=line_oriented))
    _search_if_text(path, fields)
    return ahead


def _search_if_text(path: str, fields: tuple[Field, ...]) -> None:
    """Start rg on the file when it is a text log (the ingest reports any problem with the file later)."""
    from ..errors import InputError
    from ..parse import detect
    from ..parse.compression import INPUT_ERRORS

    try:
        if detect.detect_kind(path, fields) != detect.TEXT:
            return
    except (InputError, *INPUT_ERRORS):  # the file's own turn reports it, in one line
        return
    from .text_readers import search_text_log_ahead

    search_text_log_ahead(path)
