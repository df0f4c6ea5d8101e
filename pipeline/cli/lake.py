"""`oomlab lake export`: a database as a Hive-partitioned Parquet lake (docs/lake.md)."""

from __future__ import annotations

import click

from .options import DB_OPTION, WholeHelpGroup


@click.group(cls=WholeHelpGroup)
def lake() -> None:
    """The Parquet lake: the normalized tables as Hive-partitioned Parquet that DuckDB, Spark, Trino and
    Athena read as they are."""


@lake.command("export")
@click.argument("lake_dir", metavar="DIR", type=click.Path(file_okay=False))
@DB_OPTION
def lake_export(lake_dir: str, db_path: str) -> None:
    """Write every table of the database under DIR (requests/date=YYYY-MM-DD/..., sources/...), replacing an
    earlier export there; the old lake stays whole until the new one is written."""
    from .. import api
    from .terminal import visible

    rows = api.lake_export(db_path, lake_dir)
    written = {table: n for table, n in rows.items() if n}
    click.echo(f"{sum(rows.values()):,} rows in {len(written)} tables written to {visible(lake_dir)}")
    for table, n in written.items():
        click.echo(f"  {visible(table)}: {n:,}")
