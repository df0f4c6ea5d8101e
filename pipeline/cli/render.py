"""Terminal output for the CLI: tables, CSV/JSON, progress and the ingest summary (rich).

rich is imported where it draws, so CSV and JSON output never load it and a table loads no progress bar."""

from __future__ import annotations

import csv
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from .terminal import first_column_width, fold_name, pipe_console, visible

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from ..api import QueryResult
    from ..records import IngestReport

_PROGRESS_MIN_BYTES = 32 << 20  # below this an ingest is over before a bar is worth drawing
_MAX_SUMMARY_ROWS = 40


def _stdout() -> Console:
    return pipe_console(soft_wrap=True)


def _stderr() -> Console:
    return pipe_console(stderr=True, soft_wrap=True, highlight=False)


def _jsonable(value: object) -> object:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def print_json(document: object) -> None:
    """A JSON document on stdout, keys in the library's order."""
    import json

    sys.stdout.write(json.dumps(document, indent=2, default=_jsonable) + "\n")


def print_query_result(result: QueryResult, fmt: str) -> None:
    """A query result as a table, CSV or JSON (a list of objects) on stdout; a result cut at its row limit says
    so on stderr."""
    if getattr(result, "truncated", False):
        _stderr().print(
            f"note: the first {len(result.rows):,} rows; more were left unread (--limit N or --all)", markup=False
        )
    if fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(result.rows)
    elif fmt == "json":
        import json

        rows = [{c: _jsonable(v) for c, v in zip(result.columns, row, strict=True)} for row in result.rows]
        sys.stdout.write(json.dumps(rows, indent=2, default=str) + "\n")
    else:
        from rich.table import Table
        from rich.text import Text

        console = _stdout()
        cells = [[visible(v) for v in row] for row in result.rows]
        if _table_width(result.columns, cells) > console.width:
            _print_records(console, result.columns, cells)
            return
        table = Table(*(visible(c) for c in result.columns))
        for row in cells:
            table.add_row(*(Text(v) for v in row))
        console.print(table)


def _table_width(columns: list[str], cells: list[list[str]]) -> int:
    """The width a table of these cells needs unwrapped: the widest line of each column, plus borders."""
    widths = [
        max([len(c), *(max(map(len, row[i].splitlines() or [""])) for row in cells)]) for i, c in enumerate(columns)
    ]
    return sum(widths) + 3 * len(columns) + 1


# What `oomlab sources` shows a reader by default: one row per file, with the device its rows went to.
_PATH_WIDTH = 30  # a path folds at its slashes to lines this wide (a longer name is cut with …): a row fits 80 columns
_DEVICE_WIDTH = 20  # beside the path, the longest kind (`victoriametrics_export`) and the counts, within 80 columns


def print_sources(result: QueryResult, fmt: str) -> None:
    """`oomlab sources`: a compact table of one row per file (paths relative to here where they are under it,
    folded at their slashes; a file whose rows name their own devices shows `(its rows)`), or every column (what
    placed each file on its device, its hash, when it was ingested) with `records`, CSV or JSON."""
    if fmt == "records":
        _print_records(_stdout(), result.columns, [[visible(v) for v in row] for row in result.rows])
        return
    if fmt != "table":
        print_query_result(result, fmt)
        return
    from rich.table import Table
    from rich.text import Text

    table = Table()
    table.add_column("path", max_width=_PATH_WIDTH, overflow="ellipsis")
    table.add_column("kind", no_wrap=True)
    table.add_column("rows", justify="right", no_wrap=True)
    table.add_column("rej.", justify="right", no_wrap=True)
    # a long device (a file's name standing in for one) folds: it never squeezes the path and the counts out of
    # an 80-column terminal
    table.add_column("device", max_width=_DEVICE_WIDTH, overflow="fold")
    for row in result.rows:
        value = dict(zip(result.columns, row, strict=True))
        device = "(its rows)" if value["device"] is None else value["device"]
        path = fold_name(_relative(str(value["path"])), _PATH_WIDTH)
        cells = [path, value["kind"], f"{value['rows']:,}", f"{value['rejects']:,}", device]
        table.add_row(*(Text(visible(c)) for c in cells))
    _stdout().print(table)


def _relative(path: str) -> str:
    try:
        return os.path.relpath(path) if Path(path).is_relative_to(Path.cwd()) else path
    except ValueError:
        return path


def _print_records(console: Console, columns: list[str], cells: list[list[str]]) -> None:
    """A result too wide for the terminal, one record after another with a line per column (psql's \\x)."""
    from rich.text import Text

    name_width = max(map(len, columns), default=0)
    for number, row in enumerate(cells, start=1):
        console.print(Text(f"-[ record {number} ]-", style="bold"))
        for column, value in zip(columns, row, strict=True):
            console.print(Text(f"{visible(column):<{name_width}} | {value}"))


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
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

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


def load_summary_modules_meanwhile() -> None:
    """Import what the ingest summary draws with (rich's console and table) on a thread, while the ingest
    works: DuckDB releases the GIL as it reads and writes, so on the second core they load in its shadow
    (about 0.1 s) instead of after it. The summary's own imports then find them loaded, or wait for them."""

    def load() -> None:
        import rich.console
        import rich.table  # noqa: F401

    threading.Thread(target=load, name="oomlab-summary-imports", daemon=True).start()


def print_ingest_report(report: IngestReport) -> None:
    """Errors and rejects as one line each on stderr, then the summary table on stdout."""
    from ..records import FAILED, NOTHING_FOUND, SKIPPED

    err = _stderr()
    for result in report.results:
        if result.status == FAILED:
            err.print(f"error: {visible(result.message)}", markup=False)
        elif result.status == NOTHING_FOUND:
            err.print(f"{visible(result.path)}: {visible(result.message)}", markup=False)
        elif result.status == SKIPPED and result.message:
            message = (
                f"{result.path}: {result.message}" if not result.message.startswith(result.path) else result.message
            )
            err.print(f"skipped: {visible(message)}", markup=False)
        for sample in result.reject_samples:
            err.print(f"rejected: {visible(sample)}", markup=False)
        if result.rejects > len(result.reject_samples):
            err.print(
                f"rejected: {visible(result.path)}: {result.rejects - len(result.reject_samples)} more, "
                "see table rejects",
                markup=False,
            )
    for note in report.notes:
        err.print(f"note: {visible(note)}", markup=False)
    out = _stdout()
    out.print(_summary_table(report, out.width))


def _summary_table(report: IngestReport, width: int = 80) -> Table:
    from rich.table import Table
    from rich.text import Text

    from ..records import NOTHING_FOUND

    shown = report.results[:_MAX_SUMMARY_ROWS]
    cells = [[visible(r.path), r.kind, r.status, str(r.rows), str(r.rejects)] for r in shown]
    headers = ["source", "kind", "status", "rows", "rejects"]
    table = Table(*headers, title="ingest summary")
    table.columns[0].overflow = "fold"
    budget = first_column_width(width, headers, cells)
    for row in cells:
        table.add_row(Text(fold_name(row[0], budget)), *row[1:])
    hidden = len(report.results) - _MAX_SUMMARY_ROWS
    if hidden > 0:
        table.add_row(f"... {hidden} more", "", "", "", "")
    counts = {s: sum(1 for r in report.results if r.status == s) for s in ("ingested", "skipped", "failed")}
    empty = sum(1 for r in report.results if r.status == NOTHING_FOUND)
    table.caption = (
        f"{len(report.results)} sources: {counts['ingested']} ingested, {counts['skipped']} skipped, "
        f"{counts['failed']} failed{f', {empty} with nothing found' if empty else ''}; "
        f"{sum(r.rows for r in report.results)} rows, {sum(r.rejects for r in report.results)} rejects"
    )
    return table
