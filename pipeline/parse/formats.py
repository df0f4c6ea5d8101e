"""The input formats oomlab reads: one record each, in one place.

A record says how a whole file of the format is recognised from its head (`recognise`), how a block of it is
found inside other text (`block`: a report pasted in a ticket, a shell session; parse/telemetry/blocks.py),
what reads it (`read`, for the telemetry reports), which `ingest/` module loads it (`loader`, imported when a
file needs it, so a command that loads nothing imports none) and the tables it fills. `detect.detect_kind`
walks FORMATS in order and the first format that recognises a file is its kind (`sources.kind`);
`ingest/run.py` hands the file to that format's loader; `ingest/telemetry.py` reads a report with its format's
reader; the text-log scan looks for the formats that have a block.

Adding a format is a module that reads it (parse/<family>/) and an entry here (docs/architecture.md, "Adding
things"); tests/ingest/test_formats.py fails on a format without three real cases.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import tzinfo

from ..records import Reject
from . import recognise
from .cron_files import looks_like_cronjob, looks_like_crontab
from .recognise import Head
from .snapshot.sniff import sniff_snapshot
from .telemetry import blocks
from .telemetry.dmon import DCGMI_DMON, NVSMI_DMON, dmon_kind, read_dmon
from .telemetry.nvsmi import NVSMI_APPS, NVSMI_GPU
from .telemetry.nvsmi_query import NVSMI_QUERY, looks_like_nvsmi_query, read_nvsmi_query
from .telemetry.nvsmi_table import NVSMI_TABLE, looks_like_nvsmi_table, read_nvsmi_table
from .telemetry.pmon import NVSMI_PMON, PMON_BLOCK, looks_like_pmon, read_pmon
from .telemetry.prom import PROMETHEUS, looks_like_prometheus
from .telemetry.rocm import ROCM_SMI, looks_like_rocm_smi, read_rocm_smi
from .telemetry.series import PROM_API, VM_EXPORT, looks_like_api_answer, looks_like_vm_export
from .telemetry.values import GPU_SAMPLES, PROCESS_SAMPLES, TelemetryRow
from .timers import looks_like_timer

# The kinds `sources.kind` stores that are not telemetry.
JSONL, JSON_ARRAY, CSV, PARQUET, SNAPSHOT, TEXT = "jsonl", "json", "csv", "parquet", "snapshot", "text"
CALENDAR = "calendar"
CRONTAB, CRONJOB, SYSTEMD_TIMER = "crontab", "k8s_cronjob", "systemd_timer"
MEMORY_STATS = "memory_stats"  # torch.cuda.memory_stats() as JSON (memory_summary() tables come in text logs)

# What a format is, and so which loader takes it.
REQUESTS_FAMILY = "requests"
TEXT_FAMILY = "text"
TELEMETRY_FAMILY = "telemetry"
SNAPSHOT_FAMILY = "snapshot"
ALLOCATOR_FAMILY = "allocator"
CALENDAR_FAMILY = "calendar"

Reader = Callable[[Iterable[str], tzinfo | None], Iterator[TelemetryRow | Reject]]


@dataclass(frozen=True)
class Format:
    """One input format."""

    name: str  # the kind `sources.kind` stores
    family: str
    recognise: Callable[[Head], bool]  # a whole file of it, from its head
    loader: str  # `module:function` of the ingest/ loader, called with an ingest.job.LoadJob
    tables: tuple[str, ...]
    looked_for: str = "GPU or process sample"  # what a file that yielded nothing was searched for
    origin: str | None = None  # telemetry: the `origin` its GPU rows get
    read: Reader | None = None  # telemetry reports: their rows from the file's lines
    block: blocks.BlockFormat | None = None  # found inside text logs too
    line_oriented: bool = False  # its fast reader's row numbers are checked against the file's line count

    def load(self) -> Callable[..., tuple[int, int]]:
        """The loader, imported now."""
        module, function = self.loader.split(":")
        return getattr(importlib.import_module(module), function)


_TELEMETRY_LOADER = "oomlab.ingest.telemetry:load_job"
_REQUEST_ROW = "request row"
_REQUESTS_LOADER = "oomlab.ingest.requests:load_job"


def _dmon_format(kind: str, origin: str) -> Format:
    """nvidia-smi's dmon or dcgmi's: one reader, told apart by their headers."""
    return Format(
        kind,
        TELEMETRY_FAMILY,
        lambda head: dmon_kind(head.text) == kind,
        _TELEMETRY_LOADER,
        (GPU_SAMPLES,),
        origin=origin,
        read=lambda lines, zone: read_dmon(lines, kind, zone),
        block=blocks.dmon_block(kind),
    )


def _series_format(kind: str, looks_like: Callable[[str], bool], block: blocks.BlockFormat) -> Format:
    """A store's answer of Prometheus series: read as a whole document (ingest/series.py), not line by line."""
    return Format(
        kind,
        TELEMETRY_FAMILY,
        lambda head: looks_like(head.stripped),
        "oomlab.ingest.series:load_job",
        (GPU_SAMPLES, "engine_samples"),
        looked_for="GPU or serving-engine series",
        origin="dcgm",
        block=block,
    )


def _always(head: Head) -> bool:
    return True


FORMATS: tuple[Format, ...] = (
    Format(
        PARQUET,
        REQUESTS_FAMILY,
        lambda head: head.raw.startswith(b"PAR1"),
        _REQUESTS_LOADER,
        ("requests",),
        looked_for=_REQUEST_ROW,
    ),
    Format(
        SNAPSHOT,
        SNAPSHOT_FAMILY,
        lambda head: sniff_snapshot(head.raw) is not None,
        "oomlab.ingest.snapshot:load_job",
        ("snapshots", "segments", "blocks", "trace_events", "stacks", "frames", "snapshot_ooms"),
        looked_for="segment, block or trace event",
    ),
    Format(
        PROMETHEUS,
        TELEMETRY_FAMILY,
        lambda head: looks_like_prometheus(head.stripped),
        _TELEMETRY_LOADER,
        (GPU_SAMPLES, "engine_samples"),
        looked_for="GPU or serving-engine metric",
        origin="dcgm",
        block=blocks.PROMETHEUS_BLOCK,
    ),
    # Prometheus' HTTP API answers (query_range, query) saved to a file (Loki's metric answers are the same shape),
    # and VictoriaMetrics' export
    _series_format(PROM_API, looks_like_api_answer, blocks.PROM_API_BLOCK),
    _series_format(VM_EXPORT, looks_like_vm_export, blocks.VM_EXPORT_BLOCK),
    Format(
        NVSMI_TABLE,
        TELEMETRY_FAMILY,
        lambda head: looks_like_nvsmi_table(head.text),
        _TELEMETRY_LOADER,
        (GPU_SAMPLES, PROCESS_SAMPLES),
        origin="nvidia-smi",
        read=read_nvsmi_table,
        block=blocks.TABLE_BLOCK,
    ),
    Format(
        NVSMI_QUERY,
        TELEMETRY_FAMILY,
        lambda head: looks_like_nvsmi_query(head.text),
        _TELEMETRY_LOADER,
        (GPU_SAMPLES, PROCESS_SAMPLES),
        origin="nvidia-smi",
        read=read_nvsmi_query,
        block=blocks.QUERY_BLOCK,
    ),
    Format(
        ROCM_SMI,
        TELEMETRY_FAMILY,
        lambda head: looks_like_rocm_smi(head.text),
        _TELEMETRY_LOADER,
        (GPU_SAMPLES,),
        origin="rocm-smi",
        read=lambda lines, zone: read_rocm_smi(lines),
        block=blocks.ROCM_BLOCK,
    ),
    Format(  # before dmon: pmon's header names `gpu` and `Idx` too
        NVSMI_PMON,
        TELEMETRY_FAMILY,
        lambda head: looks_like_pmon(head.text),
        _TELEMETRY_LOADER,
        (PROCESS_SAMPLES,),
        origin="nvidia-smi",
        read=read_pmon,
        block=PMON_BLOCK,
    ),
    _dmon_format(NVSMI_DMON, "nvidia-smi"),
    _dmon_format(DCGMI_DMON, "dcgm"),  # dcgmi is DCGM's own client
    Format(
        MEMORY_STATS,
        ALLOCATOR_FAMILY,
        recognise.memory_stats,
        "oomlab.ingest.allocator:load_job",
        ("allocator_stats",),
        looked_for="allocator counter",
    ),
    Format(
        JSONL,
        REQUESTS_FAMILY,
        recognise.json_lines,
        _REQUESTS_LOADER,
        ("requests",),
        looked_for=_REQUEST_ROW,
        line_oriented=True,
    ),
    Format(
        CALENDAR,
        CALENDAR_FAMILY,
        recognise.calendar,
        "oomlab.ingest.calendar:load_job",
        ("calendar_rules", "job_occurrences"),
        looked_for="scheduled job",
    ),
    Format(
        CRONJOB,
        CALENDAR_FAMILY,
        lambda head: looks_like_cronjob(head.text),
        "oomlab.ingest.calendar:load_cronjobs",
        ("calendar_rules",),
        looked_for="CronJob",
    ),
    Format(JSON_ARRAY, REQUESTS_FAMILY, recognise.json_array, _REQUESTS_LOADER, ("requests",), looked_for=_REQUEST_ROW),
    Format(
        NVSMI_GPU,
        TELEMETRY_FAMILY,
        recognise.nvsmi_csv(NVSMI_GPU),
        _TELEMETRY_LOADER,
        (GPU_SAMPLES,),
        origin="nvidia-smi",
        block=blocks.CSV_BLOCK,  # the header (or the command above) tells a compute-apps block apart
    ),
    Format(
        NVSMI_APPS,
        TELEMETRY_FAMILY,
        recognise.nvsmi_csv(NVSMI_APPS),
        _TELEMETRY_LOADER,
        (PROCESS_SAMPLES,),
        origin="nvidia-smi",
    ),
    Format(
        CSV,
        REQUESTS_FAMILY,
        recognise.request_csv,
        _REQUESTS_LOADER,
        ("requests",),
        looked_for=_REQUEST_ROW,
        line_oriented=True,
    ),
    Format(
        SYSTEMD_TIMER,
        CALENDAR_FAMILY,
        lambda head: looks_like_timer(head.text),
        "oomlab.ingest.calendar:load_timer",
        ("calendar_rules",),
        looked_for="OnCalendar= trigger",
    ),
    Format(  # after the telemetry tables and CSVs, whose lines no crontab entry is like
        CRONTAB,
        CALENDAR_FAMILY,
        lambda head: looks_like_crontab(head.text),
        "oomlab.ingest.calendar:load_crontab",
        ("calendar_rules",),
        looked_for="cron entry",
    ),
    # Anything else that is text: OOM messages, start-up reports, memory_summary() tables, allocator settings,
    # and the blocks of the formats above pasted into it.
    Format(
        TEXT,
        TEXT_FAMILY,
        _always,
        "oomlab.ingest.text:load_job",
        (
            "oom_events",
            "engine_memory",
            "allocator_stats",
            "allocator_settings",
            "text_requests",
            GPU_SAMPLES,
            PROCESS_SAMPLES,
        ),
        # a paste of telemetry the block readers did not take (a dcgmi table, a scrape) is text that yields none
        looked_for="OOM message, request line, engine start-up memory report, memory_summary() table or pasted GPU "
        "telemetry",
    ),
)
BY_NAME: dict[str, Format] = {fmt.name: fmt for fmt in FORMATS}
TELEMETRY: frozenset[str] = frozenset(fmt.name for fmt in FORMATS if fmt.family == TELEMETRY_FAMILY)
LINE_ORIENTED: frozenset[str] = frozenset(fmt.name for fmt in FORMATS if fmt.line_oriented)
# The formats found inside text logs, in the order they are tried on a line.
BLOCKS: tuple[Format, ...] = tuple(fmt for fmt in FORMATS if fmt.block is not None)


def recognised(head: Head) -> Format:
    """The first format that recognises the file whose head this is (TEXT when no other does)."""
    return next(fmt for fmt in FORMATS if fmt.recognise(head))
