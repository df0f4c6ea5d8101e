"""Calendars of scheduled jobs: windows and rules into their tables; rules expanded over the data."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

if TYPE_CHECKING:
    import pyarrow as pa

    from .job import LoadJob

from ..config import IngestOptions
from ..load import tables as load
from ..load.sql import rollback, sql_text
from ..parse.calendar import JobRule, JobWindow, expand, read_calendar
from ..parse.cron_files import read_cronjobs, read_crontab
from ..parse.timers import read_timer
from ..records import Reject
from .plausible import split_plausible

# Arrow is imported by the functions that build tables: `oomlab ingest` of request logs alone never
# needs it, and refresh_rule_occurrences runs after every ingest.


def load_job(job: LoadJob) -> tuple[int, int]:
    """A calendar's loader (parse/formats.py)."""
    return ingest_calendar(job.con, job.path, job.source_id, job.options)


def load_crontab(job: LoadJob) -> tuple[int, int]:
    """A crontab's loader: its entries run on --instance, else on every host."""
    return _load_host_calendar(job, read_crontab)


def load_timer(job: LoadJob) -> tuple[int, int]:
    """A systemd timer's loader: its runs are on --instance, else on every host."""
    return _load_host_calendar(job, read_timer)


def _load_host_calendar(job: LoadJob, read: Callable[..., Iterable[JobRule | Reject]]) -> tuple[int, int]:
    """A calendar of one host's (a crontab, a timer), read with the zone, run length and host the options give."""
    options = job.options
    items = read(job.path, options.tz, options.job_duration_minutes, options.instance)
    return _load_items(job.con, job.source_id, items)


def load_cronjobs(job: LoadJob) -> tuple[int, int]:
    """A Kubernetes CronJob manifest's loader."""
    items = read_cronjobs(job.path, job.options.tz, job.options.job_duration_minutes)
    return _load_items(job.con, job.source_id, items)


def ingest_calendar(
    con: duckdb.DuckDBPyConnection, path: Path, source_id: int, options: IngestOptions
) -> tuple[int, int]:
    """Load one calendar file; returns (windows + rules, rejects)."""
    return _load_items(con, source_id, read_calendar(path, options.tz))


def _load_items(
    con: duckdb.DuckDBPyConnection, source_id: int, items: Iterable[JobWindow | JobRule | Reject]
) -> tuple[int, int]:
    """Windows, rules and rejects into their tables; returns (windows + rules, rejects)."""
    windows, rules, rejects = [], [], []
    for item in items:
        if isinstance(item, JobWindow):
            windows.append(item)
        elif isinstance(item, JobRule):
            rules.append(item)
        else:
            rejects.append(item)
    windows, dated_wrong = split_plausible(windows, lambda w: w.start, lambda w: w.line, lambda w: repr(w))
    rejects += dated_wrong
    _insert(con, "job_occurrences", _windows_table(source_id, windows, "calendar"))
    import pyarrow as pa

    rule_schema = pa.schema(
        [
            ("source_id", pa.int32()),
            ("line", pa.int64()),
            ("name", pa.string()),
            ("cron", pa.string()),
            ("duration_minutes", pa.float64()),
            ("hosts", pa.list_(pa.string())),
        ]
    )
    _insert(
        con,
        "calendar_rules",
        pa.Table.from_pylist(
            [
                {
                    "source_id": source_id,
                    "line": r.line,
                    "name": r.name,
                    "cron": r.cron,
                    "duration_minutes": r.duration_minutes,
                    "hosts": list(r.hosts) if r.hosts else None,
                }
                for r in rules
            ],
            schema=rule_schema,
        ),
    )
    return len(windows) + len(rules), load.insert_rejects(con, source_id, rejects)


def _windows_table(source_id: int, windows: list[JobWindow], origin: str) -> pa.Table:
    import pyarrow as pa

    schema = pa.schema(
        [
            ("source_id", pa.int32()),
            ("line", pa.int64()),
            ("name", pa.string()),
            ("start_ts", pa.timestamp("us")),
            ("end_ts", pa.timestamp("us")),
            ("hosts", pa.list_(pa.string())),
            ("origin", pa.string()),
        ]
    )
    return pa.Table.from_pylist(
        [
            {
                "source_id": source_id,
                "line": w.line,
                "name": w.name,
                "start_ts": w.start,
                "end_ts": w.end,
                "hosts": list(w.hosts) if w.hosts else None,
                "origin": origin,
            }
            for w in windows
        ],
        schema=schema,
    )


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: pa.Table) -> None:
    if rows.num_rows == 0:
        return
    con.register("new_rows", rows)
    try:
        # The table name is one of this module's constants, never input.
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM new_rows")
    finally:
        con.unregister("new_rows")


def refresh_rule_occurrences(
    con: duckdb.DuckDBPyConnection, also: tuple[datetime | None, datetime | None] = (None, None)
) -> None:
    """Rebuild the runs of every recurring job over the time the data covers (a day of margin each side), and
    over `also` (the time of data kept elsewhere: the rest of a lake)."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM job_occurrences WHERE origin = 'cron'")
        low, high = con.execute(sql_text("select_data_range")).fetchall()[0]
        low, high = _widest(low, also[0], min), _widest(high, also[1], max)
        if low is not None and high is not None:
            since, until = low - timedelta(days=1), high + timedelta(days=1)
            for source_id, rules in _rules_by_source(con).items():
                windows = [w for rule in rules for w in expand(rule, since, until)]
                _insert(con, "job_occurrences", _windows_table(source_id, windows, "cron"))
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        raise


def _widest(a: datetime | None, b: datetime | None, pick: Callable[..., datetime]) -> datetime | None:
    """`pick` (min or max) of the two times that are known; None when neither is."""
    known = [t for t in (a, b) if t is not None]
    return pick(known) if known else None


def _rules_by_source(con: duckdb.DuckDBPyConnection) -> dict[int, list[JobRule]]:
    rules: dict[int, list[JobRule]] = {}
    for source_id, line, name, cron, minutes, hosts in con.execute(
        "SELECT source_id, line, name, cron, duration_minutes, hosts FROM calendar_rules"
    ).fetchall():
        rules.setdefault(source_id, []).append(JobRule(line, name, cron, minutes, tuple(hosts) if hosts else None))
    return rules
