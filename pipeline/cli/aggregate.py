"""`oomlab aggregate`: the aggregate tier computed from a Parquet lake on DuckDB or Spark (docs/spark.md)."""

from __future__ import annotations

import click


@click.command()
@click.option("--lake", "lake_dir", required=True, help="The lake: a folder, or with Spark a URI (s3a://, gs://, ...).")
@click.option("--out", "out_dir", required=True, help="Where the aggregates go: a folder, or with Spark a URI.")
@click.option(
    "--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb", show_default=True, help="What computes them."
)
@click.option("--master", metavar="URL", help="Spark's master (default local[2]): spark://host:7077, yarn, k8s://...")
def aggregate(lake_dir: str, out_dir: str, engine: str, master: str | None) -> None:
    """Compute the aggregates findings and reports read (per instance and minute, per device, per baseline bucket,
    ...) from the lake at --lake into --out, replacing an earlier set there."""
    if master is not None and engine != "spark":
        raise click.UsageError("--master is Spark's: add --engine spark")
    from .. import api
    from .terminal import visible

    rows = api.aggregate(lake_dir, out_dir, engine, master)
    aggregates = {name: n for name, n in rows.items() if name.startswith("agg_")}
    click.echo(
        f"{len(aggregates)} aggregates ({sum(aggregates.values()):,} rows) and {len(rows) - len(aggregates)} "
        f"tables written to {visible(out_dir)} by {engine}"
    )
    for name, n in aggregates.items():
        click.echo(f"  {visible(name)}: {n:,}")
