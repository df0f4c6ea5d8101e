"""`oomlab estimate` and `oomlab alerts`: sizing before deployment and alert rules from the fleet's data."""

from __future__ import annotations

import click


@click.command()
def estimate() -> None:
    """Estimate the GPU memory a model needs (not built yet)."""
    raise click.ClickException("oomlab estimate is not built yet")


@click.group()
def alerts() -> None:
    """Alerting rules derived from the fleet's data."""
