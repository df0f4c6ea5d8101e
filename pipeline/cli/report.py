"""`oomlab report` and `oomlab demo`: HTML and JSON reports."""

from __future__ import annotations

from datetime import datetime

import click

from .options import AGGREGATES_OPTION, DB_OPTION, WholeHelpGroup, one_source

OUT_OPTION = click.option(
    "-o",
    "--output",
    "html_path",
    required=True,
    metavar="FILE.html",
    type=click.Path(dir_okay=False),
    help="Where to write the HTML page.",
)
JSON_OPTION = click.option(
    "--json", "json_path", metavar="FILE", type=click.Path(dir_okay=False), help="Also write the report's data as JSON."
)


@click.group(cls=WholeHelpGroup)
def report() -> None:
    """Render HTML and JSON reports from the database."""


@report.command("weekly")
@DB_OPTION
@AGGREGATES_OPTION
@click.option("--since", type=click.DateTime(), help="Start of the week (UTC; default: 7 days before --until).")
@click.option("--until", type=click.DateTime(), help="End of the week (UTC; default: midnight after the last event).")
@OUT_OPTION
@JSON_OPTION
def report_weekly(
    db_path: str,
    aggregates: str | None,
    since: datetime | None,
    until: datetime | None,
    html_path: str,
    json_path: str | None,
) -> None:
    """The weekly review: headline changes, ranked findings with actions, and the charts behind them."""
    from .. import api
    from .render_report import print_written

    report = api.weekly_report(one_source(db_path, aggregates), since, until, aggregates)
    print_written(report.write(html_path, json_path))


@report.command("incident")
@DB_OPTION
@AGGREGATES_OPTION
@click.option("--event", "event_id", type=int, help="The OOM's event_id (see `oomlab query` on oom_events).")
@click.option("--instance", help="The instance that ran out of memory (with --at).")
@click.option("--at", type=click.DateTime(), help="About when (UTC); the nearest OOM of --instance is chosen.")
@OUT_OPTION
@JSON_OPTION
def report_incident(
    db_path: str,
    aggregates: str | None,
    event_id: int | None,
    instance: str | None,
    at: datetime | None,
    html_path: str,
    json_path: str | None,
) -> None:
    """One OOM explained: the message decoded, its cause and evidence, the hours around it, the snapshot. Without
    --event or --instance: the latest OOM."""
    from .. import api
    from .render_report import print_written, say_latest

    if event_id is not None and instance is not None:
        raise click.UsageError("give either --event ID or --instance NAME --at TIME, not both")
    if instance is not None and at is None:
        raise click.UsageError("--instance needs --at TIME")
    report = api.incident_report(one_source(db_path, aggregates), event_id, instance, at, aggregates)
    if event_id is None and instance is None:
        say_latest(report.doc["event"])
    print_written(report.write(html_path, json_path))


@click.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Folder for the database and reports (default: a new oomlab-demo-N folder here).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the weekly report in a browser.")
def demo(out_dir: str | None, open_browser: bool) -> None:
    """Ingest the bundled sample data and render its weekly report and the most important incident."""
    from .. import api
    from .render_report import print_demo, say_step

    result = api.demo(out_dir, say=say_step)
    print_demo(result)
    if open_browser:
        click.launch(str(result.written[0]))
