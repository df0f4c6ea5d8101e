"""What a format's loader is handed (parse/formats.py names each format's loader): one file, its kind, where
its rows go, and what the loop already has for it."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

    from ..config import IngestOptions
    from ..parse.facts import FileFacts
    from ..parse.text.textscan import SearchAhead
    from .progress import ReadPosition


@dataclass(frozen=True)
class LoadJob:
    """One file to load in the open transaction; a loader returns (rows, rejects)."""

    con: duckdb.DuckDBPyConnection
    path: Path
    kind: str
    source_id: int
    options: IngestOptions
    facts: Future[FileFacts]  # content hash and line count, computed beside the read
    position: ReadPosition | None  # how far the read has got, for the progress bar
    robust: bool  # the fast path failed: read row by row
    search: SearchAhead | None = None  # a text log's rg search, started before the loop (ingest/ahead.py)
    notes: list[str] = field(default_factory=list)  # what the loader has to say of the file (sources.note)
