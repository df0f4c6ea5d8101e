"""The first input file's facts (content hash, line count), started before `oomlab ingest` loads DuckDB and opens
the database.

Hashing a gigabyte takes about 0.65 s of a core, and loading the ingest modules and creating a new
database about 0.3 s of the other: started first, the hash runs beside them instead of after. This module
imports nothing heavy before the thread starts; the thread detects the file's kind itself (a request log's
lines are counted in the same pass).
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
    if not files or files[0].error is not None:
        return None
    path = files[0].path

    def line_oriented() -> bool:
        from ..parse import detect

        return detect.detect_kind(path, fields) in detect.LINE_ORIENTED

    return Ahead(path, facts_in_background(path, count_lines=line_oriented))
