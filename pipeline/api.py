"""The library facade the CLI calls: one function per command."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import DatabaseError, OomlabError, UsageError, resource_error

# The library behind each function is imported inside it: `oomlab ingest` starts hashing its first file
# before DuckDB, polars and pyarrow load, `oomlab --help` loads none of them, and `oomlab sources` only DuckDB
# and load.connection.
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import duckdb

    from .analyses.estimate import MeasuredPeak, MemoryEstimate, ModelShape, Workload
    from .analyses.fleet.alert_rules import DeviceTuning
    from .analyses.fleet.sizing import Card
    from .config import IngestOptions
    from .findings.data_quality import DataQualityNote
    from .findings.finding import Finding
    from .ingest.progress import Progress
    from .ingest.prometheus_pull import PullReport
    from .records import IngestReport
    from .report.document import Report


def ingest(
    db_path: str | Path, paths: list[str], options: IngestOptions, progress: Progress | None = None
) -> IngestReport:
    """Ingest files and directories (walked once, in order) into the database at `db_path`. The first file's
    hash starts before DuckDB loads and the database opens, so on two cores they overlap."""
    from .ingest.ahead import start_first
    from .ingest.paths import check_file_count, expand_paths

    files = expand_paths(paths, database=db_path)
    check_file_count(paths, files, options.many_files)
    ahead = start_first(files, options.fields)

    from .ingest.run import ingest_files
    from .load.connection import connect

    try:
        with connect(db_path) as con:
            return ingest_files(con, files, options, progress, ahead)
    finally:
        ahead.close()


def ingest_lake(
    lake_dir: str | Path, paths: list[str], options: IngestOptions, progress: Progress | None = None
) -> IngestReport:
    """Ingest files and directories into the Parquet lake at `lake_dir` (docs/lake.md) with a database's
    idempotency: an unchanged file is skipped, a changed one replaces its own files and nothing else."""
    from .ingest.ahead import start_first
    from .ingest.paths import check_file_count, expand_paths

    files = expand_paths(paths)
    check_file_count(paths, files, options.many_files)
    ahead = start_first(files, options.fields)

    from .ingest.lake import ingest_into_lake

    try:
        return ingest_into_lake(Path(lake_dir), files, options, progress, ahead)
    finally:
        ahead.close()


def pull_prometheus(
    db_path: str | Path,
    url: str,
    since: datetime | None = None,
    until: datetime | None = None,
    step: str = "30s",
    matchers: Sequence[str] = (),
    instance: str | None = None,
    credentials: dict[str, str | None] | None = None,
    ca_file: str | None = None,
    timeout_s: float = 30.0,
    lake_dir: str | Path | None = None,
) -> PullReport:
    """Pull a time range (default: the 7 days before `until`, itself now by default; UTC) of the known GPU and
    serving-engine series from a Prometheus server into the database (ingest/prometheus_pull.py).
    `credentials` names where secrets are read (http_get.Credentials: token_env, token_file, user,
    password_env, password_file); then the OOM sightings are reconciled as after an ingest. With `lake_dir`, into
    that Parquet lake instead (docs/lake.md)."""
    from .ingest.http_get import Client, Credentials
    from .ingest.prometheus_pull import PullRequest
    from .ingest.prometheus_pull import pull_prometheus as pull
    from .load.connection import connect
    from .load.reconcile import reconcile_oom_sightings
    from .units import parse_duration

    span = parse_duration(step)
    if span is None:
        raise UsageError(f"--step {step!r}: not a duration (30s, 1m, 1m30s)")
    end = until or datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    client = Client(url, Credentials(**(credentials or {})), ca_file, timeout_s)
    request = PullRequest(
        client, since or end - timedelta(days=7), end, span.total_seconds(), tuple(matchers), instance
    )
    if lake_dir is not None:
        from .ingest.lake import pull_into_lake

        return pull_into_lake(Path(lake_dir), request)
    with connect(db_path) as con:
        report = pull(con, request)
        if report.rows:
            reconcile_oom_sightings(con)  # telemetry places files that name no device
        return report


def __getattr__(name: str) -> object:
    """`api.IngestOptions` and `api.IngestReport`, loaded when first asked for (no command but ingest needs them)."""
    if name == "IngestOptions":
        from .config import IngestOptions

        return IngestOptions
    if name == "IngestReport":
        from .records import IngestReport

        return IngestReport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows of a query; `truncated` when the row limit left more unread."""

    columns: list[str]
    rows: list[tuple[object, ...]]
    truncated: bool = False


def query(
    db_path: str | Path,
    sql: str,
    params: list[object] | None = None,
    limit: int | None = None,
    timeout: float | None = None,
) -> QueryResult:
    """Run one SQL statement against the database, read-only in fact: no file outside it, no extension, no
    setting can be reached (load.connection.lock_down); at most `limit` rows and `timeout` seconds (None: no
    bound; `oomlab query` sets both, cli.options), stopped by Ctrl-C too (load.connection.run_bounded)."""
    import duckdb

    from .load.connection import connect, lock_down, run_bounded

    if not sql.strip().strip(";").strip():
        raise UsageError("no SQL statement given", hint='e.g. oomlab query "SELECT count(*) FROM stg_oom_events"')
    with connect(db_path, read_only=True) as con:
        lock_down(con)
        try:
            fetched = run_bounded(con, sql, params or [], limit, timeout)
            return QueryResult(fetched.columns, fetched.rows, fetched.truncated)
        except duckdb.Error as exc:
            said = resource_error(exc)
            if said is not None:
                raise said from exc
            refused = isinstance(exc, duckdb.PermissionException) or "configuration has been locked" in str(exc)
            hint = "oomlab query reads the database only: no other file, extension or setting" if refused else None
            raise DatabaseError(f"query failed: {_duckdb_reason(exc)}", hint=hint) from exc


def _duckdb_reason(exc: BaseException) -> str:
    """DuckDB's error with its own hints kept ("Did you mean ...", "Candidate bindings: ...") on one line; the
    echo of the query under them (`LINE 1: ...` and its caret) is left out, the user typed it."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    kept = [line for line in lines[1:] if line.startswith(("Did you mean", "Candidate bindings"))]
    return " ".join(lines[:1] + kept)


class FindingsResult(list["Finding"]):
    """What `oomlab findings` shows: the ranked findings (the list itself, so that a caller that wants only them
    iterates as before), `data_quality`, the note that leads them (None when nothing was set aside, flagged
    or left out), and `untimed_left_out`: the OOMs without a time a --since/--until window left out (0 without
    a window, which holds them all)."""

    def __init__(self, found: list[Finding], data_quality: DataQualityNote | None, untimed_left_out: int = 0) -> None:
        super().__init__(found)
        self.data_quality = data_quality
        self.untimed_left_out = untimed_left_out


def findings(
    db_path: str | Path | None,
    since: datetime | None = None,
    until: datetime | None = None,
    aggregates: str | Path | None = None,
) -> FindingsResult:
    """Every analysis's findings over [since, until], most important first, and the data-quality note of the
    whole database, or of the aggregate set `aggregates` (`oomlab aggregate --out`) in its place."""
    from .findings.collect import collect_findings
    from .findings.data_quality import data_quality_note
    from .load.sql import sql_text

    with _analysis_connection(db_path, aggregates) as con:
        windowed = since is not None or until is not None
        untimed = int(con.sql(sql_text("q_ooms_outside_windows")).fetchall()[0][0]) if windowed else 0
        return FindingsResult(collect_findings(con, since, until), data_quality_note(con), untimed)


def _analysis_connection(db_path: str | Path | None, aggregates: str | Path | None) -> duckdb.DuckDBPyConnection:
    """What the analyses read: the database read-only, or an aggregate set opened as one (load/aggregate_set.py)."""
    if aggregates is not None:
        from .load.aggregate_set import open_aggregate_set

        return open_aggregate_set(Path(aggregates))
    if db_path is None:
        raise OomlabError("nothing to read: no database and no aggregate set", hint="--db FILE or --aggregates AGG")
    from .load.connection import connect

    return connect(db_path, read_only=True)


def sources(db_path: str | Path) -> QueryResult:
    """What was ingested, oldest first."""
    return query(db_path, "SELECT * FROM rpt_sources")


def weekly_report(
    db_path: str | Path | None,
    since: datetime | None = None,
    until: datetime | None = None,
    aggregates: str | Path | None = None,
) -> Report:
    """The weekly review over [since, until) (default: the last 7 days of data), of the database or of the
    aggregate set `aggregates`."""
    from .report.weekly import weekly_report as build

    with _analysis_connection(db_path, aggregates) as con:
        return build(con, since, until)


def incident_report(
    db_path: str | Path | None,
    event_id: int | None = None,
    instance: str | None = None,
    at: datetime | None = None,
    aggregates: str | Path | None = None,
) -> Report:
    """The incident page of one OOM: by event id, or the OOM of `instance` nearest to `at`; of the database or of
    the aggregate set `aggregates`."""
    from .report.incident import incident_report as build

    with _analysis_connection(db_path, aggregates) as con:
        return build(con, event_id=event_id, instance=instance, at=at)


def important_ooms(
    db_path: str | Path, findings: list[dict[str, Any]], since: datetime, until: datetime, count: int
) -> list[int]:
    """Event ids of up to `count` OOMs in [since, until), most important first (the weekly report's `findings`
    in rank order say which matter)."""
    from .load.connection import connect
    from .report.demo_choices import important_ooms as choose

    with connect(db_path, read_only=True) as con:
        return choose(con, findings, since, until, count)


def prune(db_path: str | Path, before: datetime) -> dict[str, int]:
    """Delete every row dated before `before` (naive UTC), in one transaction; the rows deleted per table."""
    from .load.connection import connect
    from .load.prune import prune_before

    with connect(db_path) as con:
        return prune_before(con, before)


@dataclass(frozen=True)
class DemoResult:
    """What `oomlab demo` made: the database, the files written, what each page is, and the findings shown."""

    db_path: Path
    written: list[Path]
    findings: list[dict[str, object]]
    ingest: IngestReport
    pages: list[tuple[Path, str]] = field(default_factory=list)  # each HTML page and what it shows


def demo(
    out_dir: str | Path | None = None, progress: Progress | None = None, say: Callable[[str], None] | None = None
) -> DemoResult:
    """Ingest the bundled sample logs into a fresh database in `out_dir` and render the weekly report (the
    fleet's last week), the incident report of the OOM behind its most important finding, and that of an OOM
    a bundled snapshot recorded (its page shows the snapshot view). `say` hears each step as it starts."""
    tell = say or (lambda _line: None)
    tell("ingesting the sample fleet (sample_logs/fleet: request logs, text logs, nvidia-smi, job calendars)")
    from .assets import asset_dir
    from .config import IngestOptions

    out = Path(out_dir) if out_dir else _new_folder(Path.cwd() / "oomlab-demo")
    db_path = out / "oomlab-demo.duckdb"
    out.mkdir(parents=True, exist_ok=True)
    db_path.unlink(missing_ok=True)  # a fresh database every run: the demo must show the bundled data only
    samples = asset_dir("sample_logs")
    report = ingest(db_path, [str(samples / "fleet")], IngestOptions(), progress)
    tell("ingesting the real H200 captures (sample_logs/h200: OOM messages, memory printouts, snapshots)")
    captures = ingest(db_path, [str(samples / "h200")], IngestOptions(), progress)
    report.results += captures.results
    report.notes += captures.notes
    written, pages, findings = _demo_pages(db_path, out, samples, tell)
    return DemoResult(db_path, written, findings, report, pages)


def _demo_pages(
    db_path: Path, out: Path, samples: Path, tell: Callable[[str], None]
) -> tuple[list[Path], list[tuple[Path, str]], list[dict[str, object]]]:
    """The demo's weekly page and incident pages: the files written, each page with what it shows, the findings."""
    from .load.connection import connect
    from .report.demo_choices import folder_week, most_important_oom, oom_with_snapshot
    from .report.incident import incident_report as build_incident
    from .report.weekly import weekly_report as build_weekly
    from .report.weekly_data import report_window

    with connect(db_path, read_only=True) as con:
        window = report_window(con, *(folder_week(con, samples / "fleet") or (None, None)))
        last_day = (window.until - timedelta(microseconds=1)).date()
        week = f"the week {window.since.date()} to {last_day} of the sample fleet and the real H200 captures"
        tell(f"rendering the weekly report ({week})")
        weekly = build_weekly(con, window.since, window.until)
        written = weekly.write(out / "weekly.html", out / "weekly.json")
        pages = [(out / "weekly.html", f"{week}: findings ranked by impact, with the charts behind them")]
        event = most_important_oom(con, weekly.doc["findings"], window.since, window.until)
        recorded = oom_with_snapshot(con)
        roles = {
            event: "the OOM behind the top finding",
            recorded: "a real H200 OOM, with the snapshot that recorded it",
        }
        for oom in dict.fromkeys(e for e in (event, recorded) if e is not None):
            page = out / f"incident-{oom}.html"
            tell(f"rendering {page.name} ({roles[oom]})")
            incident = build_incident(con, event_id=oom)
            written += incident.write(page, out / f"incident-{oom}.json")
            pages.append((page, f"{roles[oom]}: {_incident_line(incident.doc)}"))
    return written, pages, weekly.doc["findings"]


def _incident_line(doc: dict[str, Any]) -> str:
    """An incident page's event in a few words: its cause, where and when."""
    from .findings.wording import cause_words

    event, verdict = doc.get("event") or {}, doc.get("verdict") or {}
    cause = cause_words(verdict.get("cause"))
    when = str(event.get("ts") or "")[:16].replace("T", " ")
    return f"{cause} on {event.get('instance') or 'an unnamed device'}" + (f" at {when}" if when else "")


def _new_folder(base: Path) -> Path:
    """`base`, or `base-2`, `base-3`, ... : the first that does not exist yet."""
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def inspect_snapshot(
    paths: str | Path | Sequence[str | Path],
    requested_bytes: int | None = None,
    *,
    top: int = 10,
    device_total_bytes: int | None = None,
) -> dict[str, Any]:
    """`oomlab snapshot inspect`: one snapshot explained without a database (the stable JSON-ready dict); given
    several of one process, the newest, with the growth across them. A size no allocation or card can have (not
    positive, or beyond CARD_MAX_BYTES, the largest card there is) is a UsageError."""
    from .analyses.snapshot.inspect import inspect_snapshot as inspect
    from .load.settings import CARD_MAX_BYTES
    from .units import format_bytes

    for option, size in (("--request", requested_bytes), ("--device-total", device_total_bytes)):
        if size is not None and not 0 < size <= CARD_MAX_BYTES:
            largest = format_bytes(CARD_MAX_BYTES)
            raise UsageError(f"{option} {size:,} bytes: no allocation or card is that size (1 B to {largest})")
    return inspect(paths, requested_bytes, top=top, device_total_bytes=device_total_bytes)


def diff_snapshots(before: str | Path, after: str | Path, *, top: int = 20) -> dict[str, Any]:
    """`oomlab snapshot diff`: per-site change in bytes and blocks, segments added and removed, and the leak
    suspects of `after` judged with that growth."""
    from .analyses.snapshot.inspect import diff_snapshots as diff

    return diff(before, after, top=top)


def parameter_count(text: str) -> int:
    """`7B`, `500M` or `6738415616` as a count; ValueError names what would do (the CLI's --params)."""
    from .analyses.estimate import parse_params

    return parse_params(text)


def gpu_card(name: str) -> Card:
    """The card table's entry for `A10`, `H200`, `A100 80GB`, ...; ValueError lists the known ones."""
    from .analyses.estimate import card_named

    return card_named(name)


@dataclass(frozen=True)
class EstimateRequest:
    """What `oomlab estimate` was asked: a config.json, or the parameter count and shape; the workload."""

    batch: int
    input_len: int
    output_len: int
    model_path: str | None = None
    params: int | None = None
    dtype: str | None = None
    shape: dict[str, int | None] | None = None  # layers, kv_heads, head_dim, hidden, intermediate, vocab
    kv_dtype: str | None = None
    gpu: Card | None = None
    context_bytes: int | None = None
    db_path: str | Path | None = None  # set the estimate beside what this database measured
    model_version: str | None = None


@dataclass(frozen=True)
class EstimateResult:
    """The model's shape, the workload, the estimate, and the measured peaks when a database was read."""

    model: ModelShape
    workload: Workload
    estimate: MemoryEstimate
    measured: list[MeasuredPeak] | None


def estimate(request: EstimateRequest) -> EstimateResult:
    """`oomlab estimate`: the memory a model needs for a workload, beside what the fleet measured."""
    from .analyses import estimate as lib

    model = _model_shape(request)
    work = lib.Workload(request.batch, request.input_len, request.output_len, request.kv_dtype)
    context = lib.DEFAULT_CONTEXT_BYTES if request.context_bytes is None else request.context_bytes
    result = lib.estimate(model, work, request.gpu, context)
    measured = None
    if request.db_path is not None:
        from .load.connection import connect

        with connect(request.db_path, read_only=True) as con:
            measured = lib.measured_peaks(con, request.model_version, model)
    return EstimateResult(model, work, result, measured)


def _model_shape(request: EstimateRequest) -> ModelShape:
    from .analyses import estimate as lib

    if request.model_path is not None:
        return lib.shape_from_config(request.model_path, request.dtype, request.params)
    shape = request.shape or {}
    return lib.shape_from_params(
        request.params,  # type: ignore[arg-type]
        request.dtype,  # type: ignore[arg-type]
        shape["layers"],  # type: ignore[arg-type]
        shape["kv_heads"],  # type: ignore[arg-type]
        shape["head_dim"],  # type: ignore[arg-type]
        hidden=shape.get("hidden"),
        intermediate=shape.get("intermediate"),
        vocab=shape.get("vocab"),
    )


@dataclass(frozen=True)
class AlertRules:
    """`oomlab alerts export`: the rule file as YAML, its document, and the per-device tunings (None: untuned)."""

    yaml: str
    document: dict[str, object]
    tunings: list[DeviceTuning] | None


def alert_rules(db_path: str | Path | None = None) -> AlertRules:
    """Prometheus rules on DCGM's memory metrics, tuned per device from the database when one is given."""
    from .analyses.fleet.alert_rules import device_tunings, rules_document, to_yaml

    tunings = None
    if db_path is not None:
        from .load.connection import connect

        with connect(db_path, read_only=True) as con:
            tunings = device_tunings(con)
    document = rules_document(tunings)
    return AlertRules(to_yaml(document), document, tunings)


def lake_export(db_path: str | Path, lake_dir: str | Path) -> dict[str, int]:
    """Write the database's normalized tables under `lake_dir` as Hive-partitioned Parquet (docs/lake.md),
    replacing an earlier export there; the rows written per table."""
    from .load.connection import connect
    from .load.lake import export_lake

    with connect(db_path, read_only=True) as con:
        return export_lake(con, Path(lake_dir))


def aggregate(
    lake_dir: str | Path, out_dir: str | Path, engine: str = "duckdb", master: str | None = None
) -> dict[str, int]:
    """Compute the aggregate tier (sql/aggregates/) from the lake at `lake_dir` on `engine` ('duckdb', or 'spark'
    with `master`, default local[2]) into `out_dir`, with copies of the lake's other tables; the rows per table.
    On Spark either may be a URI (s3a://, gs://, abfss://, file://)."""
    from .load.aggregate import aggregate_lake
    from .load.engines import open_engine

    runner = open_engine(engine, master)
    try:
        # passed as given: aggregate_lake tells a URI (s3a://, file://) from a path, which pathlib would fold
        return aggregate_lake(lake_dir, out_dir, runner)
    finally:
        runner.close()
