"""The library facade the CLI calls: one function per command."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from .config import IngestOptions
from .errors import DatabaseError
from .findings.finding import Finding
from .ingest.ahead import Ahead
from .ingest.run import IngestReport, Progress, ingest_paths
from .load.tables import connect
from .report.document import Report

if TYPE_CHECKING:
    from .analyses.estimate import MeasuredPeak, ModelShape
    from .analyses.fleet.alert_rules import DeviceTuning


def ingest(
    db_path: str | Path,
    paths: list[str],
    options: IngestOptions,
    progress: Progress | None = None,
    ahead: Ahead | None = None,
) -> IngestReport:
    """Ingest files and directories into the database at `db_path`; `ahead`: the first file's facts, when the
    caller started them before loading this module (`ingest_ahead.start_first`)."""
    with connect(db_path) as con:
        return ingest_paths(con, paths, options, progress, ahead)


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows of a query."""

    columns: list[str]
    rows: list[tuple[object, ...]]


def query(db_path: str | Path, sql: str, params: list[object] | None = None) -> QueryResult:
    """Run one SQL statement read-only against the database."""
    with connect(db_path, read_only=True) as con:
        try:
            cursor = con.execute(sql, params or [])
            columns = [d[0] for d in cursor.description] if cursor.description else []
            return QueryResult(columns, cursor.fetchall() if columns else [])
        except duckdb.Error as exc:
            raise DatabaseError(f"query failed: {str(exc).splitlines()[0]}") from exc


def findings(db_path: str | Path, since: datetime | None = None, until: datetime | None = None) -> list[Finding]:
    """Every analysis's findings over [since, until], most important first."""
    from .findings.collect import collect_findings

    with connect(db_path, read_only=True) as con:
        return collect_findings(con, since, until)


def sources(db_path: str | Path) -> QueryResult:
    """What was ingested, oldest first."""
    return query(db_path, "SELECT * FROM rpt_sources")


def weekly_report(db_path: str | Path, since: datetime | None = None, until: datetime | None = None) -> Report:
    """The weekly review over [since, until) (default: the last 7 days of data)."""
    from .report.weekly import weekly_report as build

    with connect(db_path, read_only=True) as con:
        return build(con, since, until)


def incident_report(
    db_path: str | Path, event_id: int | None = None, instance: str | None = None, at: datetime | None = None
) -> Report:
    """The incident page of one OOM: by event id, or the OOM of `instance` nearest to `at`."""
    from .report.incident import incident_report as build

    with connect(db_path, read_only=True) as con:
        return build(con, event_id=event_id, instance=instance, at=at)


@dataclass(frozen=True)
class DemoResult:
    """What `oomlab demo` made: the database, the pages written and the findings shown."""

    db_path: Path
    written: list[Path]
    findings: list[dict[str, object]]
    ingest: IngestReport


def demo(out_dir: str | Path | None = None, progress: Progress | None = None) -> DemoResult:
    """Ingest the bundled sample logs into a fresh database in `out_dir` and render the weekly report (the
    fleet's last week), the incident report of the OOM behind its most important finding, and that of an OOM
    a bundled snapshot recorded (its page shows the snapshot view)."""
    from .assets import asset_dir
    from .report.demo_choices import folder_week, most_important_oom, oom_with_snapshot
    from .report.incident import incident_report as build_incident
    from .report.weekly import weekly_report as build_weekly
    from .report.weekly_data import report_window

    out = Path(out_dir) if out_dir else _new_folder(Path.cwd() / "oomlab-demo")
    db_path = out / "oomlab-demo.duckdb"
    out.mkdir(parents=True, exist_ok=True)
    db_path.unlink(missing_ok=True)  # a fresh database every run: the demo must show the bundled data only
    samples = asset_dir("sample_logs")
    report = ingest(db_path, [str(samples / "fleet"), str(samples / "h200")], IngestOptions(), progress)
    with connect(db_path, read_only=True) as con:
        window = report_window(con, *(folder_week(con, samples / "fleet") or (None, None)))
        weekly = build_weekly(con, window.since, window.until)
        written = weekly.write(out / "weekly.html", out / "weekly.json")
        event = most_important_oom(con, weekly.doc["findings"], window.since, window.until)
        recorded = oom_with_snapshot(con)
        for oom in dict.fromkeys(e for e in (event, recorded) if e is not None):
            written += build_incident(con, event_id=oom).write(
                out / f"incident-{oom}.html", out / f"incident-{oom}.json"
            )
    return DemoResult(db_path, written, weekly.doc["findings"], report)


def _new_folder(base: Path) -> Path:
    """`base`, or `base-2`, `base-3`, ... : the first that does not exist yet."""
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def measured_peaks(db_path: str | Path, model_version: str | None, shape: ModelShape) -> list[MeasuredPeak]:
    """`oomlab estimate --db`: the measured peaks of a model version beside the estimate of the same requests."""
    from .analyses.estimate import measured_peaks as measure

    with connect(db_path, read_only=True) as con:
        return measure(con, model_version, shape)


def alert_tunings(db_path: str | Path) -> list[DeviceTuning]:
    """`oomlab alerts export --db`: each device's alert levels, tuned from its steady level."""
    from .analyses.fleet.alert_rules import device_tunings

    with connect(db_path, read_only=True) as con:
        return device_tunings(con)
