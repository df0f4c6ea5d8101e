"""Typed records passed between the stages (parse, normalize, load) and from ingest to its callers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class OomMessage:
    """What one out-of-memory message says, in bytes; None where the message does not say."""

    framework: str
    requested_bytes: int | None = None
    total_capacity_bytes: int | None = None
    free_bytes: int | None = None
    already_allocated_bytes: int | None = None
    reserved_bytes: int | None = None
    allocated_by_pytorch_bytes: int | None = None
    reserved_unallocated_bytes: int | None = None
    process_in_use_bytes: int | None = None
    allowed_bytes: int | None = None
    private_pool_bytes: int | None = None
    other_processes: tuple[tuple[int, int], ...] = ()
    gpu_index: int | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class TextOom:
    """An OOM message found in a text log: where it starts, its timestamp if the line had one."""

    line: int
    ts: datetime | None
    oom: OomMessage
    # the failing request as the line before the traceback states it (parse.text.request_line): field -> value
    request: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Reject:
    """Input that was read but not loaded, with the reason; kept in the `rejects` table."""

    line: int | None
    reason: str
    raw: str = field(default="")


# What became of one input file: NOTHING_FOUND is a file read whole that holds nothing oomlab reads (its
# message says what was looked for); the ingest still succeeds.
SKIPPED, INGESTED, FAILED, NOTHING_FOUND = "skipped", "ingested", "failed", "nothing found"


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
    notes: list[str] = field(default_factory=list)  # said once about the whole run (a clock far behind the data)

    @property
    def failed(self) -> list[SourceResult]:
        return [r for r in self.results if r.status == FAILED]
