"""Text logs: every OOM message found becomes an oom_events row (origin `message`); serving engines' start-up
memory reports, read from the same pass, become engine_memory rows, memory_summary() tables allocator_stats
rows, lines that set PYTORCH_CUDA_ALLOC_CONF allocator_settings rows, a service's request lines text_requests
rows, and telemetry pasted into the log (a report in a ticket, a shell session) rows of the telemetry tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ..config import IngestOptions
from ..load import tables as load
from ..load.settings import TS_EARLIEST, TS_LATEST
from ..parse import formats
from ..parse.alloc_conf import SettingsScanner
from ..parse.allocator import SummaryScanner
from ..parse.compression import read_head
from ..parse.telemetry.block_scan import BlockScanner
from ..parse.text.envelope import STAMPED, envelope_layout
from ..parse.text.host_label import host_named_in
from ..parse.text.request_lines import RequestScanner
from ..parse.text.textlog import log_clock, scan_text_log
from ..records import Reject, TextOom
from .alloc_conf import insert_stated
from .allocator import insert_moments
from .plausible import split_plausible
from .telemetry import insert_blocks, insert_engine_memory, startup_scanner
from .text_readers import ALSO_READ
from .text_requests import insert_text_requests

# How much of a log tells whether its lines stand in a log store's envelopes.
ENVELOPE_HEAD_BYTES = 64 * 1024

if TYPE_CHECKING:
    from ..parse.text.textscan import SearchAhead, Window
    from .job import LoadJob
    from .progress import ReadPosition


def load_job(job: LoadJob) -> tuple[int, int]:
    """A text log's loader (parse/formats.py)."""
    return ingest_text_log(job.con, job.path, job.source_id, job.options, job.position, job.search, job.notes)


def ingest_text_log(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    source_id: int,
    options: IngestOptions,
    position: ReadPosition | None = None,
    ahead: SearchAhead | None = None,
    notes: list[str] | None = None,
) -> tuple[int, int]:
    """Load the OOM messages (and engine start-up reports) of one text log; returns (rows, rejects). How far
    the scan has got goes to `position`; `ahead` is rg's search of it started before (ingest/ahead.py). A log
    in a log store's envelopes is unwrapped first (ingest/envelope.py)."""
    layout = envelope_layout(read_head(path, ENVELOPE_HEAD_BYTES).decode("utf-8", errors="replace"))
    if layout is not None and layout != STAMPED:  # a time before each line is read as it stands
        from .envelope import ingest_envelope

        # each device's streams are a text log of their own; what they say of their lines (a year guessed) is the
        # file's to say
        read = lambda con, scratch, staged, opts: ingest_text_log(con, scratch, staged, opts, notes=notes)  # noqa: E731
        return ingest_envelope(con, path, layout, source_id, options, notes, read)
    # --instance, else the one node or host the log names of itself (a pod's log), else the file's name
    instance = options.instance or host_named_in(path) or options.instance_for(path)
    found: list[TextOom] = []
    rejects: list[Reject] = []
    year = options.at.year if options.at is not None else None  # --at places lines that state no year
    clock = log_clock(path, options.tz, year)
    startup = startup_scanner(options, year)
    summaries = SummaryScanner(startup.clock)
    settings = SettingsScanner(startup.clock)
    served = RequestScanner(startup.clock, (TS_EARLIEST, TS_LATEST))
    # request lines are stored window by window (a log of them holds millions): how many, and those dated where no
    # GPU log can be
    lines, lines_wrong = 0, []
    blocks = BlockScanner(formats.BLOCKS, clock.zone, options.at)

    def on_window(window: Window) -> None:
        nonlocal lines
        startup.clock.learn_from(clock)  # what the OOM scan's clock learned of the year from this window's head
        startup.window(window)
        summaries.window(window)
        settings.window(window)
        served.window(window)
        stored, wrong = insert_text_requests(con, served.take(), source_id, instance, options.model_version)
        lines += stored
        lines_wrong.extend(wrong)
        blocks.window(window)
        if position is not None:
            position.fraction = window.progress

    for item in scan_text_log(path, on_window=on_window, also=ALSO_READ, ahead=ahead, clock=clock):
        (rejects if isinstance(item, Reject) else found).append(item)
    found, dated_wrong = split_plausible(found, lambda f: f.ts, lambda f: f.line, lambda f: f.oom.message)
    reports, reports_wrong = split_plausible(startup.reports(), lambda r: r.ts, lambda r: r.line, str)
    moments, moments_wrong = split_plausible(summaries.moments(), lambda m: m.ts, lambda m: m.line, lambda m: "")
    stated, stated_wrong = split_plausible(settings.found, lambda s: s.ts, lambda s: s.line, lambda s: s.variable)
    events = _event_columns(found, source_id, instance, options.model_version)
    rows = load.insert_oom_events(con, events, len(found))
    rows += insert_engine_memory(con, reports, source_id, instance)
    rows += insert_moments(con, moments, source_id, instance, options.at)
    rows += insert_stated(con, stated, source_id, instance)
    rows += lines
    guesser = clock if clock.guessed is not None else startup.clock
    if guesser.guessed is not None and notes is not None:
        notes.append(
            f"lines without a year read as {guesser.guessed}: {guesser.guess_reason} (pass --at to place them)"
        )
    in_blocks, blocks_wrong = insert_blocks(con, path, blocks.found, source_id, options, instance)
    rows += in_blocks
    rejects = sorted(
        rejects + blocks_wrong + dated_wrong + reports_wrong + moments_wrong + stated_wrong + lines_wrong,
        key=lambda r: r.line or 0,
    )
    return rows, load.insert_rejects(con, source_id, rejects)


def _event_columns(found: list[TextOom], source_id: int, instance: str, model_version: str | None) -> load.Columns:
    """The oom_events rows of the messages found, column by column; the failing request's model and size from
    the line the log wrote about it (`TextOom.request`), --model-version first."""
    count = len(found)
    requests = [dict(item.request) for item in found]
    return {
        **load.message_columns([item.oom for item in found]),
        "source_id": [source_id] * count,
        "line": [item.line for item in found],
        "ts": [item.ts for item in found],
        "instance": [instance] * count,
        "model_version": [model_version or r.get("model_version") for r in requests],
        "request_id": [r.get("request_id") for r in requests],
        **{name: [_count(r.get(name)) for r in requests] for name in _REQUEST_SIZES},
        "origin": ["message"] * count,
    }


_REQUEST_SIZES = ("batch_size", "input_sequence_length", "output_sequence_length")


def _count(value: str | None) -> int | None:
    """A request size as written (request_line keeps only whole numbers of at most 9 digits)."""
    return None if value is None else int(value)
