"""Every command and subcommand of `oomlab` has working `--help` with a usage line, a description and help
text for each option; `oomlab --version` prints the package version."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner, Result

from oomlab import __version__
from oomlab.cli.main import cli

# The commands README.md documents; the walk must find at least these.
DOCUMENTED = {
    "oomlab ingest",
    "oomlab query",
    "oomlab sources",
    "oomlab findings",
    "oomlab snapshot inspect",
    "oomlab snapshot diff",
    "oomlab report weekly",
    "oomlab report incident",
    "oomlab estimate",
    "oomlab alerts export",
    "oomlab demo",
}


def _walk(command: click.Command, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], click.Command]]:
    """`command` and everything below it, each with its full path from `oomlab`."""
    found = [(path, command)]
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name=path[-1])
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{' '.join(path)} lists {name} but cannot load it"
            found += _walk(sub, (*path, name))
    return found


COMMANDS = _walk(cli, ("oomlab",))
IDS = [" ".join(path) for path, _ in COMMANDS]


def _help(path: tuple[str, ...]) -> Result:
    return CliRunner().invoke(cli, [*path[1:], "--help"], prog_name="oomlab", catch_exceptions=False)


def _options(path: tuple[str, ...], command: click.Command) -> list[click.Option]:
    """Its options including --help (which click adds per context); arguments have no help in click."""
    ctx = click.Context(command, info_name=path[-1])
    return [p for p in command.get_params(ctx) if isinstance(p, click.Option)]


def test_walk_finds_the_documented_commands() -> None:
    assert set(IDS) >= DOCUMENTED, f"not found: {sorted(DOCUMENTED - set(IDS))}"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_help_shows_usage_and_description(path: tuple[str, ...], command: click.Command) -> None:
    result = _help(path)
    assert result.exit_code == 0, result.output
    usage, _, rest = result.output.partition("\n")
    assert re.match(rf"Usage: {re.escape(' '.join(path))}( |$)", usage), f"usage line: {usage!r}"
    for argument in (p for p in command.params if isinstance(p, click.Argument)):
        assert argument.human_readable_name in usage, f"{argument.name} not in usage line {usage!r}"
    description = re.split(r"^(?:Options|Commands|Arguments):", rest, maxsplit=1, flags=re.M)[0]
    assert (command.help or "").strip() and description.strip(), f"no description:\n{result.output}"
    shown = [p for p in _options(path, command) if not p.hidden]
    assert all(p.opts[0] in rest for p in shown), f"options missing from:\n{result.output}"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_every_option_has_help(path: tuple[str, ...], command: click.Command) -> None:
    bare = [p.opts[0] for p in _options(path, command) if not (p.help or "").strip()]
    assert not bare, f"{' '.join(path)}: options without help text: {bare}"


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"], prog_name="oomlab", catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.output == f"oomlab, version {__version__}\n"
