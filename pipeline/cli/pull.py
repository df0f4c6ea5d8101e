"""`oomlab pull prometheus`: a time range of GPU and serving-engine series from a Prometheus server."""

from __future__ import annotations

from datetime import datetime

import click

from .options import DB_OPTION, LAKE_OPTION, WholeHelpGroup, one_destination


@click.group(cls=WholeHelpGroup)
def pull() -> None:
    """Pull telemetry from where a fleet keeps it (docs/sources.md)."""


@pull.command("prometheus")
@click.option("--url", required=True, help="The server's base URL, e.g. http://prometheus:9090 (no /api/v1).")
@click.option("--since", type=click.DateTime(), help="Start of the range (UTC; default: 7 days before --until).")
@click.option("--until", type=click.DateTime(), help="End of the range (UTC; default: now).")
@click.option("--step", default="30s", show_default=True, help="Resolution: at most one sample per step (30s, 1m).")
@click.option(
    "--match",
    "matchers",
    multiple=True,
    metavar="SELECTOR",
    help='Repeatable. Labels only ({namespace="llm"}) restricts every known metric; a selector naming a metric '
    "is pulled as written instead of the known ones.",
)
@DB_OPTION
@LAKE_OPTION
@click.option("--instance", help="Put every row on this device (default: each series' host or node label).")
@click.option("--token-env", metavar="VAR", help="Environment variable holding a bearer token.")
@click.option("--token-file", metavar="FILE", type=click.Path(dir_okay=False), help="File holding a bearer token.")
@click.option("--user", help="User for basic auth (the password from --password-env or --password-file).")
@click.option("--password-env", metavar="VAR", help="Environment variable holding the basic-auth password.")
@click.option("--password-file", metavar="FILE", type=click.Path(dir_okay=False), help="File holding the password.")
@click.option("--ca-file", type=click.Path(exists=True, dir_okay=False), help="CA bundle for the server's TLS.")
@click.option("--timeout", default=30.0, show_default=True, help="Seconds to wait for one answer.")
def prometheus(
    url: str,
    since: datetime | None,
    until: datetime | None,
    step: str,
    matchers: tuple[str, ...],
    db_path: str,
    lake_dir: str | None,
    instance: str | None,
    token_env: str | None,
    token_file: str | None,
    user: str | None,
    password_env: str | None,
    password_file: str | None,
    ca_file: str | None,
    timeout: float,
) -> None:
    """Pull the GPU and serving-engine memory series oomlab knows, over a time range, into the database (or, with
    --lake, a Parquet lake). Exit 0
    when every range was pulled, 1 when some could not be (the rest is kept; `oomlab sources` says which)."""
    from .. import api

    secrets = {"token_env": token_env, "token_file": token_file, "user": user}
    secrets |= {"password_env": password_env, "password_file": password_file}
    one_destination(lake_dir)
    report = api.pull_prometheus(
        db_path,
        url,
        since,
        until,
        step,
        matchers,
        instance,
        secrets,
        ca_file=ca_file,
        timeout_s=timeout,
        lake_dir=lake_dir,
    )
    click.echo(
        f"{report.url}: {report.series} series pieces, {report.samples} samples read, {report.rows} rows added "
        f"({report.since:%Y-%m-%d %H:%M} to {report.until:%Y-%m-%d %H:%M} UTC)"
    )
    for note in report.notes:
        click.echo(f"note: {note}")
    for missing in report.missing:
        click.echo(f"not pulled: {missing}", err=True)
    click.get_current_context().exit(1 if report.missing else 0)
