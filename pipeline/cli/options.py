"""Options and converters shared by the command modules (main.py, estimate.py, report.py)."""

from __future__ import annotations

import click
from click.core import ParameterSource


class WholeHelpGroup(click.Group):
    """A command group whose help lists each command with the whole first sentence of its description,
    wrapped, never cut (click cuts short help at 45 characters)."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, first_sentence(command.short_help or command.help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def first_sentence(text: str) -> str:
    """The first sentence of a command's description (up to a full stop that ends a word, or its first
    paragraph), on one line."""
    paragraph = " ".join(text.strip().split("\n\n", 1)[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


DB_OPTION = click.option(
    "--db",
    "db_path",
    default="oomlab.duckdb",
    show_default=True,
    envvar="OOMLAB_DB",
    type=click.Path(dir_okay=False),
    help="DuckDB file (env OOMLAB_DB).",
)

# The rows `oomlab query` returns unless asked for more (--limit, --all): a terminal shows a few hundred at most,
# and a result that does not end (SELECT * FROM range(1e9)) must not fill the memory on its way to the screen.
QUERY_ROW_LIMIT = 10_000
# How long one query may run (--timeout): an analysis over a year of a large fleet takes seconds, so minutes are
# a runaway join or an endless recursive CTE, which then stops rather than holding the machine.
QUERY_TIMEOUT_S = 300.0

FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="How to print the rows.",
)


def size_option(value: str | None) -> int | None:
    """A size such as `1GiB` or `512MB` as bytes; a usage error names the bad value."""
    from ..units import parse_bytes

    try:
        return parse_bytes(value) if value is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


AGGREGATES_OPTION = click.option(
    "--aggregates",
    "aggregates",
    metavar="AGG",
    type=click.Path(file_okay=False, exists=True),
    help="Read an aggregate set (`oomlab aggregate --out AGG`) in place of --db.",
)


def one_source(db_path: str, aggregates: str | None) -> str | None:
    """The database to read, or None where an aggregate set is read in its place; --db given on the command line
    beside --aggregates names two sources, a usage error (--db has a default, so only its source tells)."""
    if aggregates is None:
        return db_path
    if click.get_current_context().get_parameter_source("db_path") is ParameterSource.COMMANDLINE:
        raise click.UsageError("--db and --aggregates name two sources: give one")
    return None


LAKE_OPTION = click.option(
    "--lake",
    "lake_dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Write a Hive-partitioned Parquet lake under DIR instead of a database (docs/lake.md).",
)


def one_destination(lake_dir: str | None) -> None:
    """--db and --lake both given name two destinations: a usage error (--db's default and OOMLAB_DB do not count)."""
    if (
        lake_dir is not None
        and click.get_current_context().get_parameter_source("db_path") is ParameterSource.COMMANDLINE
    ):
        raise click.UsageError("--db and --lake name two destinations: give one")
