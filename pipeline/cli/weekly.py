"""`oomlab weekly` (the weekly review job, one run) and `oomlab prune` (delete old rows)."""

from __future__ import annotations

import json
from datetime import datetime

import click

from .options import DB_OPTION


@click.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="The job's TOML config (docs/weekly.md): inputs, database, output folder, thresholds.",
)
@click.option("--week", metavar="YYYY-Www", help="The ISO week to review (default: the last complete one).")
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON (for chat hooks).")
def weekly(config_path: str, week: str | None, as_json: bool) -> None:
    """One run of the weekly review job: ingest what is new, pull the week from the configured Prometheus
    servers, render the week's report, its incident pages and the index. Exit 3 when a finding at or above the
    configured confidence is new since last week, else 4 when a Prometheus range of the week could not be pulled
    (the pages are still written, from what the database holds)."""
    from ..weekly.job import run_weekly
    from .render import print_json
    from .terminal import visible

    run = run_weekly(config_path, week)
    if as_json:
        print_json(run.to_json())
    else:
        click.echo(f"{run.week.name} ({run.week.since:%Y-%m-%d %H:%M} to {run.week.until:%Y-%m-%d %H:%M} UTC)")
        ingest = run.ingest
        click.echo(f"ingest: {ingest['ingested']} ingested, {ingest['skipped']} skipped, {ingest['failed']} failed")
        for pull in run.pulls:
            click.echo(
                f"pull {visible(pull['url'])}: {pull['samples']:,} samples, {pull['rows']:,} rows added, "
                f"{pull['missing']} ranges missing"
            )
            if pull["error"]:
                click.echo(f"  error: {visible(pull['error'])}")
            elif pull["first_missing"]:
                click.echo(f"  first missing: {visible(pull['first_missing'])}")
            for note in pull["notes"]:
                click.echo(f"  note: {visible(note)}")
        if run.has_data:
            click.echo("  ".join(f"{visible(k)}: {v}" for k, v in run.headline.items()))
        else:
            click.echo("no data in this week")
        click.echo(f"{run.findings} findings, {len(run.new_findings)} new at confidence >= {run.alert_confidence}")
        for found in run.new_findings:
            click.echo(f"  new: {visible(found['kind'])} on {visible(found['subject'])} ({found['confidence']:.2f})")
        if run.removed_weeks:
            click.echo(f"removed: {', '.join(run.removed_weeks)}")
        click.echo(f"index: {visible(str(run.out_dir / 'index.html'))}")
    click.get_current_context().exit(run.exit_code)


@click.command()
@DB_OPTION
@click.option("--before", required=True, type=click.DateTime(), help="Delete every row dated before this (UTC).")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def prune(db_path: str, before: datetime, as_json: bool) -> None:
    """Delete every row dated before --before from the database, in one transaction; counts per table."""
    from .. import api

    counts = api.prune(db_path, before)
    if as_json:
        click.echo(json.dumps(counts, sort_keys=True))
        return
    width = max(map(len, counts))
    for table, n in counts.items():
        click.echo(f"{table:<{width}}  {n:>10,}")
    click.echo(f"{sum(counts.values()):,} rows deleted before {before:%Y-%m-%d %H:%M}")
