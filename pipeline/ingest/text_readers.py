"""The readers that share one search of a text log (OOM messages, serving engines' start-up memory reports,
memory_summary() tables, allocator settings), and that search started ahead of the ingest: this module loads no
DuckDB."""

from __future__ import annotations

from pathlib import Path

from ..parse import formats
from ..parse.alloc_conf import SETTINGS_FINDER
from ..parse.allocator import SUMMARY_FINDER
from ..parse.telemetry.block_scan import block_finder
from ..parse.telemetry.startup import FINDER as STARTUP_FINDER
from ..parse.text import textscan
from ..parse.text.textlog import OOM_FINDER
from ..parse.text.textscan import SearchAhead

# The readers beside the OOM scan's own (`scan_text_log(also=...)`)
ALSO_READ = (STARTUP_FINDER, SUMMARY_FINDER, SETTINGS_FINDER, block_finder(formats.BLOCKS))


def search_text_log_ahead(path: str | Path) -> SearchAhead | None:
    """Start the search of the text log at `path` that `ingest_text_log` will take up (rg runs beside the
    rest of the start-up)."""
    return textscan.search_ahead(path, [OOM_FINDER, *ALSO_READ])
