"""`oomlab report` and `oomlab demo`: HTML and JSON reports."""

from __future__ import annotations

import click


@click.group()
def report() -> None:
    """Render HTML and JSON reports from the database."""


@click.command()
def demo() -> None:
    """Ingest the bundled sample data and render its reports (not built yet)."""
    raise click.ClickException("oomlab demo is not built yet")
