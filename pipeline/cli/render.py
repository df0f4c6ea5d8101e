"""Terminal output for the CLI: tables, CSV/JSON, progress and the ingest summary (rich)."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ..records import FAILED, SKIPPED, IngestReport

if TYPE_CHECKING:
    from ..api import QueryResult

_PROGRESS_MIN_BYTES = 32 << 20  # below this an ingest is over before a bar is worth drawing
_MAX_SUMMARY_ROWS = 40


def _stdout() -> Console:
    return Console(soft_wrap=True)


def _stderr() -> Console:
    return Console(stderr=True, soft_wrap=True, highlight=False)


def _jsonable(value: object) -> object:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def print_json(document: object) -> None:
    """A JSON document on stdout, keys in the library's order."""
    sys.stdout.write(json.dumps(document, indent=2, default=_jsonable) + "\n")


def print_query_result(result: QueryResult, fmt: str) -> None:
    """A query result as a table, CSV or JSON (a list of objects) on stdout."""
    if fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(result.rows)
    elif fmt == "json":
        rows = [{c: _jsonable(v) for c, v in zip(result.columns, row, strict=True)} for row in result.rows]
        sys.stdout.write(json.dumps(rows, indent=2, default=str) + "\n")
    else:
        table = Table(*result.columns)
        for row in result.rows:
            table.add_row(*("" if v is None else str(v) for v in row))
        _stdout().print(table)


class _BarProgress:
    """A rich progress bar over all input bytes, advanced within a file as DuckDB reports progress; drawn only
    for inputs big enough to want one."""

    def __init__(self) -> None:
        self._bar: Progress | None = None
        self._task = None
        self._done = 0
        self._size = 0

    def begin(self, total_bytes: int) -> bool:
        if total_bytes < _PROGRESS_MIN_BYTES:
            return False
        columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
        self._bar = Progress(*columns, console=_stderr(), transient=True)
        self._bar.start()
        self._task = self._bar.add_task("ingest", total=total_bytes)
        return True

    def start(self, path: str, size: int) -> None:
        self._size = size
        self._draw(description=Path(path).name)

    def update(self, fraction: float) -> None:
        self._draw(completed=self._done + min(fraction, 1.0) * self._size)

    def finish(self) -> None:
        self._done += self._size
        self._draw(completed=self._done)

    def _draw(self, **fields: object) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, **fields)  # type: ignore[arg-type]

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


@contextmanager
def progress_bar(quiet: bool) -> Iterator[_BarProgress | None]:
    """A progress bar on stderr (None with --quiet); it appears once ingest says the inputs are large."""
    if quiet:
        yield None
        return
    bar = _BarProgress()
    try:
        yield bar
    finally:
        bar.close()


def print_ingest_report(report: IngestReport) -> None:
    """Errors and rejects as one line each on stderr, then the summary table on stdout."""
    err = _stderr()
    for result in report.results:
        if result.status == FAILED:
            err.print(f"error: {result.message}", markup=False)
        elif result.status == SKIPPED and result.message:
            err.print(
                f"skipped: {result.path}: {result.message}"
                if not result.message.startswith(result.path)
                else f"skipped: {result.message}",
                markup=False,
            )
        for sample in result.reject_samples:
            err.print(f"rejected: {sample}", markup=False)
        if result.rejects > len(result.reject_samples):
            err.print(
                f"rejected: {result.path}: {result.rejects - len(result.reject_samples)} more, see table rejects",
                markup=False,
            )
    _stdout().print(_summary_table(report))


def _summary_table(report: IngestReport) -> Table:
    table = Table("source", "kind", "status", "rows", "rejects", title="ingest summary")
    table.columns[0].overflow = "fold"
    for result in report.results[:_MAX_SUMMARY_ROWS]:
        table.add_row(result.path, result.kind, result.status, str(result.rows), str(result.rejects))
    hidden = len(report.results) - _MAX_SUMMARY_ROWS
    if hidden > 0:
        table.add_row(f"... {hidden} more", "", "", "", "")
    counts = {s: sum(1 for r in report.results if r.status == s) for s in ("ingested", "skipped", "failed")}
    table.caption = (
        f"{len(report.results)} sources: {counts['ingested']} ingested, {counts['skipped']} skipped, "
        f"{counts['failed']} failed; {sum(r.rows for r in report.results)} rows, "
        f"{sum(r.rejects for r in report.results)} rejects"
    )
    return table
