"""The `oomlab` command line: parses options, calls one library function, prints the result."""

from __future__ import annotations

import os
import signal
import sys
from datetime import datetime
from typing import TYPE_CHECKING

import click

from .. import __version__
from ..assets import remove_scratch
from ..errors import STOP_ASKED, STOP_EXIT_CODE, OomlabError, UsageError, resource_error
from .options import (
    AGGREGATES_OPTION,
    DB_OPTION,
    FORMAT_OPTION,
    LAKE_OPTION,
    QUERY_ROW_LIMIT,
    QUERY_TIMEOUT_S,
    WholeHelpGroup,
    one_destination,
    one_source,
    size_option,
)

if TYPE_CHECKING:
    from ..fields import Field

# Commands import the library inside their bodies: `oomlab --help` and `--version` stay instant
# instead of loading DuckDB, polars and pyarrow first (tests/cli/test_startup.py checks what each loads).


PIPE_CLOSED_EXIT = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader closed the pipe (`| head`)


class OomlabGroup(WholeHelpGroup):
    """The one place that turns oomlab's errors into one-line messages (exit 1); --debug re-raises. A reader that
    closes the pipe (`oomlab findings | head`) ends the run quietly with PIPE_CLOSED_EXIT. Its help lists each
    command with the whole first sentence of its description, wrapped, never cut."""

    group_class = type  # subgroups (snapshot, lake, report) are OomlabGroups too

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _quiet_closed_pipe()
            raise SystemExit(PIPE_CLOSED_EXIT) from None
        except OomlabError as exc:
            if (ctx.obj or {}).get("debug"):
                raise
            raise click.ClickException(exc.message) from exc
        except Exception as exc:  # a limit of the machine (memory, disk) is one line too; anything else a traceback
            said = resource_error(exc)
            if said is None or (ctx.obj or {}).get("debug"):
                raise
            raise click.ClickException(said.message) from exc


@click.group(cls=OomlabGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="oomlab")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Find out why GPU inference services run out of memory."""
    ctx.obj = {"debug": debug}


def _quiet_closed_pipe() -> None:
    """Point stdout at /dev/null: the interpreter's last flush of what is still buffered would fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _parse_tags(pairs: tuple[str, ...]) -> dict[str, str]:
    tags = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not key=value", param_hint="--tag")
        tags[key] = value
    return tags


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@DB_OPTION
@click.option("--instance", help="Instance label for files that do not name one (default: the file name).")
@click.option("--model-version", help="Model version label for files that do not name one.")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Extra label, repeatable.")
@click.option(
    "--map",
    "maps",
    multiple=True,
    metavar="CANONICAL=THEIRS[:UNIT]",
    help="Field name mapping, repeatable; a byte field may give the unit of its numbers: "
    "allocated_after=gpu_mem_mib:MiB (B, KB/KiB, MB/MiB, GB/GiB, TB/TiB; binary, MB = MiB), and so may the time "
    "and the latency: ts=timestamp:ms, latency_ms=e2e_latency_s:s (s, ms, us, ns).",
)
@click.option(
    "--mapping",
    type=click.Path(exists=True, dir_okay=False),
    help='TOML file of field mappings: instance = "pod_name", allocated_after = { field = "mem_mib", unit = "MiB" }.',
)
@click.option("--tz", help="Time zone of timestamps without one (default UTC), e.g. Europe/Berlin.")
@click.option(
    "--at",
    metavar="TIME",
    help="When inputs without a time of their own were taken (memory_summary / memory_stats printouts, an "
    "nvidia-smi -q report, a metrics scrape without timestamps, a request log that states no time), or when a "
    "trace whose times count from its start (0.0, 4.31, ...) started; ISO 8601 (read in --tz). Without it "
    "printouts are stored with no time and such request rows are rejects.",
)
@click.option(
    "--columns",
    metavar="F1,F2,...",
    help="The field names of nvidia-smi CSVs written with `noheader`, as queried (memory.total,memory.used,...).",
)
@click.option(
    "--job-duration",
    type=click.FloatRange(min=0, min_open=True),
    metavar="MINUTES",
    help="How long a run of a job in a crontab, Kubernetes CronJob or systemd timer lasts, where the file does "
    "not bound it (a `timeout` wrapper, activeDeadlineSeconds).",
)
@LAKE_OPTION
@click.option(
    "--many-files",
    is_flag=True,
    help="Read more than 10,000 files anyway (each is a transaction of its own: slow; joining small logs is faster).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def ingest(
    paths: tuple[str, ...],
    db_path: str,
    instance: str | None,
    model_version: str | None,
    tags: tuple[str, ...],
    maps: tuple[str, ...],
    mapping: str | None,
    tz: str | None,
    at: str | None,
    columns: str | None,
    job_duration: float | None,
    lake_dir: str | None,
    many_files: bool,
    quiet: bool,
) -> None:
    """Ingest request logs, text logs with OOM messages and snapshots into the database (or, with --lake, a
    Parquet lake)."""
    ctx = click.get_current_context()
    one_destination(lake_dir)
    from ..config import IngestOptions

    options = IngestOptions(
        instance=instance,
        model_version=model_version,
        tags=_parse_tags(tags),
        tz=_check_tz(tz),
        fields=_mapped_fields(maps, mapping),
        at=_parse_at(at, tz),
        columns=tuple(c.strip() for c in (columns or "").split(",") if c.strip()),
        many_files=many_files,
        job_duration_minutes=job_duration,
    )

    from .. import api
    from .render import load_summary_modules_meanwhile, print_ingest_report, progress_bar

    load_summary_modules_meanwhile()
    with progress_bar(quiet) as progress:
        if lake_dir is None:
            report = api.ingest(db_path, list(paths), options, progress)
        else:
            report = api.ingest_lake(lake_dir, list(paths), options, progress)
    print_ingest_report(report)
    ctx.exit(1 if report.failed else 0)


def _mapped_fields(maps: tuple[str, ...], mapping: str | None) -> tuple[Field, ...]:
    """The fields with --mapping's and --map's names (--map wins); a unit that is none is a usage error."""
    from ..fields import parse_map_options, read_mapping_file, with_mapping

    try:
        return with_mapping({**(read_mapping_file(mapping) if mapping else {}), **parse_map_options(maps)})
    except UsageError as exc:
        raise click.UsageError(exc.message) from None


def _parse_at(at: str | None, tz: str | None) -> datetime | None:
    """--at as naive UTC; a time without an offset is read in --tz (UTC when none)."""
    from zoneinfo import ZoneInfo

    from ..units import to_utc_naive

    if at is None:
        return None
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        hint = "--at"
        raise click.BadParameter(f"{at!r} is not an ISO 8601 time such as 2026-11-30T01:00", param_hint=hint) from None
    return to_utc_naive(moment, ZoneInfo(tz) if tz else None)


def _check_tz(tz: str | None) -> str | None:
    if tz is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(f"unknown time zone {tz!r}", param_hint="--tz") from None
    return tz


@cli.command()
@click.argument("sql")
@DB_OPTION
@FORMAT_OPTION
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=QUERY_ROW_LIMIT,
    show_default=True,
    help="Return at most this many rows.",
)
@click.option("--all", "all_rows", is_flag=True, help="Return every row (no --limit).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=QUERY_TIMEOUT_S,
    show_default=True,
    help="Stop the query after this many seconds.",
)
def query(sql: str, db_path: str, fmt: str, limit: int, all_rows: bool, timeout: float) -> None:
    """Run a read-only SQL query against the database (bounded in rows and time; Ctrl-C stops it)."""
    from .. import api
    from .render import print_query_result

    print_query_result(api.query(db_path, sql, limit=None if all_rows else limit, timeout=timeout), fmt)


@cli.command()
@DB_OPTION
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "records", "csv", "json"]),
    default="table",
    show_default=True,
    help="table: one row per file with the device its rows went to; records: every column, one file at a time.",
)
def sources(db_path: str, fmt: str) -> None:
    """List what was ingested: one row per file, with its kind, rows, rejects and device."""
    from .. import api
    from .render import print_sources

    print_sources(api.sources(db_path), fmt)


@cli.command()
@DB_OPTION
@AGGREGATES_OPTION
@click.option("--since", type=click.DateTime(), help="Only data from this time on (UTC).")
@click.option("--until", type=click.DateTime(), help="Only data before this time (UTC).")
@click.option("--json", "json_path", metavar="FILE", help="Also write the findings as JSON (`-` for stdout).")
@FORMAT_OPTION
@click.option("--verbose", "-v", is_flag=True, help="Also print why each finding is believed (its statistics).")
def findings(
    db_path: str,
    aggregates: str | None,
    since: datetime | None,
    until: datetime | None,
    json_path: str | None,
    fmt: str,
    verbose: bool,
) -> None:
    """What causes the fleet's OOMs and what to change, most important first."""
    from .. import api
    from .render_findings import print_findings, write_findings_csv, write_findings_json

    result = api.findings(one_source(db_path, aggregates), since, until, aggregates)
    if json_path:
        write_findings_json(result, since, until, json_path)
    if fmt == "json" and json_path != "-":
        write_findings_json(result, since, until, "-")
    elif fmt == "csv":
        write_findings_csv(result)
    elif json_path != "-":
        print_findings(result, verbose=verbose)


@cli.group()
def snapshot() -> None:
    """Explain PyTorch memory snapshots without a database."""


@snapshot.command("inspect")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON document instead of tables.")
@click.option("--request", "request", metavar="SIZE", help="Would an allocation of SIZE (e.g. 1GiB) fit, and why not.")
@click.option("--device-total", metavar="SIZE", help="Device memory, to tell external pressure from capacity.")
@click.option("--top", default=10, show_default=True, help="How many sites and suspects to list.")
@click.option("--stacks", is_flag=True, help="Print each leak suspect's full stack, innermost frame first.")
def snapshot_inspect(
    files: tuple[str, ...], as_json: bool, request: str | None, device_total: str | None, top: int, stacks: bool
) -> None:
    """State, fragmentation, top allocation sites, leak suspects and OOM moments of a snapshot.

    Several FILES of one process: the newest is inspected (oldest first by their trace times, else in the
    order given) and each site's growth across them is shown and weighed in the leak suspects.
    """
    from .. import api
    from .render import print_json
    from .render_snapshot import print_inspect

    report = api.inspect_snapshot(files, size_option(request), top=top, device_total_bytes=size_option(device_total))
    print_json(report) if as_json else print_inspect(report, stacks)


@snapshot.command("diff")
@click.argument("before", type=click.Path(exists=True, dir_okay=False))
@click.argument("after", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option("--top", default=20, show_default=True, help="How many sites to list.")
def snapshot_diff(before: str, after: str, as_json: bool, top: int) -> None:
    """Per-site change in bytes and blocks between two snapshots, the segments added and removed, and the
    leak suspects of AFTER given that growth."""
    from .. import api
    from .render import print_json
    from .render_snapshot import print_diff

    diff = api.diff_snapshots(before, after, top=top)
    print_json(diff) if as_json else print_diff(diff)


def _register_commands() -> None:
    """Commands that live in modules of their own (cli_*.py), so each stays small."""
    from .aggregate import aggregate
    from .estimate import alerts, estimate
    from .lake import lake
    from .pull import pull
    from .report import demo, report
    from .weekly import prune, weekly

    for command in (report, demo, estimate, alerts, weekly, prune, lake, aggregate, pull):
        cli.add_command(command)


_register_commands()


def main() -> None:
    """Console entry point.

    It leaves without tearing the interpreter down: freeing every object and module takes 0.05-0.1 s after
    a large ingest and buys a short-lived command nothing, since by then every database connection is
    closed (the library opens them in with-blocks) and the output is flushed here. A traceback (--debug)
    still takes the ordinary way out. SIGTERM (a job scheduler's stop, `kill`) ends the run as an exception
    would: open transactions roll back, temporary files go (assets.scratch_dir), exit status 143.
    """
    signal.signal(signal.SIGTERM, _terminated)
    try:
        cli(prog_name="oomlab")
        code = 0
    except SystemExit as exc:  # click ends every run this way
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    finally:
        remove_scratch()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # the reader went (`| head`) before the last of the output was written
            code = PIPE_CLOSED_EXIT if code == 0 else code
        except ValueError:  # a closed stream
            pass
    os._exit(code)


def _terminated(signum: int, _frame: object) -> None:
    signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM while cleaning up ends the process at once
    STOP_ASKED.set()  # for loops whose current step DuckDB ends with its own error instead (errors.stop_if_asked)
    raise SystemExit(STOP_EXIT_CODE)


if __name__ == "__main__":  # pragma: no cover
    main()
