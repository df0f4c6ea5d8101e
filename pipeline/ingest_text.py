"""Text logs: every OOM message found becomes an oom_events row (origin `message`)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from . import load
from .config import IngestOptions
from .parse.textlog import scan_text_log
from .records import Reject, TextOom


def ingest_text_log(con: duckdb.DuckDBPyConnection, path: Path, source_id: int,
                    options: IngestOptions) -> tuple[int, int]:
    """Load the OOM messages of one text log; returns (events, rejects)."""
    instance = options.instance_for(path)
    events, rejects = [], []
    for item in scan_text_log(path, default_tz=options.tz):
        if isinstance(item, Reject):
            rejects.append(item)
        else:
            events.append(_event(item, source_id, instance, options.model_version))
    return load.insert_oom_events(con, events), load.insert_rejects(con, source_id, rejects)


def _event(found: TextOom, source_id: int, instance: str, model_version: str | None) -> dict[str, object]:
    return {**load.oom_fields(found.oom), "source_id": source_id, "line": found.line, "ts": found.ts,
            "instance": instance, "model_version": model_version, "origin": "message"}
