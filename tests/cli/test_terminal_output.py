"""What the CLI prints from the data is text, never markup or terminal control (issue 14, item 9): rich markup
in an error text crashed `oomlab query` or vanished, raw ANSI escapes from logs reached the terminal, and a
wide result printed as a wall of empty cells on an 80-column terminal."""

from __future__ import annotations

from oomlab.api import FindingsResult
from oomlab.cli.render_findings import print_findings
from oomlab.cli.terminal import visible
from oomlab.findings.finding import Finding, Window

from conftest import H200

# a real frame of a CUDA error (libc10_cuda.so in brackets is what crashed rich), colour markup, a screen clear
HOSTILE = "[/opt/torch/lib/libc10_cuda.so] [red]gone[/red] \x1b[2J\x9b31m cleared"


def test_visible_shows_control_characters_as_escapes() -> None:
    assert visible(HOSTILE) == "[/opt/torch/lib/libc10_cuda.so] [red]gone[/red] \\x1b[2J\\x9b31m cleared"
    assert visible("tab\tand\nnewline") == "tab\tand\nnewline"


def test_query_prints_markup_and_escapes_as_text(run_cli, db) -> None:
    assert run_cli("ingest", H200 / "serve_leak" / "oom_messages.txt.gz", "--db", db, "--quiet").exit_code == 0
    sql = "SELECT '" + HOSTILE.replace("'", "''") + "' AS message"
    result = run_cli("query", sql, "--db", db)
    assert result.exit_code == 0, result.output
    assert "[/opt/torch/lib/libc10_cuda.so]" in result.stdout and "[red]gone[/red]" in result.stdout
    assert "\x1b" not in result.stdout and "\x9b" not in result.stdout and "\\x1b[2J" in result.stdout


def test_a_wide_result_is_printed_record_by_record(run_cli, db) -> None:
    assert run_cli("ingest", H200 / "serve_leak" / "oom_messages.txt.gz", "--db", db, "--quiet").exit_code == 0
    result = run_cli("query", "SELECT * FROM oom_events ORDER BY event_id", "--db", db)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "-[ record 1 ]-" and sum(line.startswith("-[ record") for line in lines) == 3
    assert any(line.split("|")[0].strip() == "requested_bytes" for line in lines)
    assert not any("┃" in line or "│" in line for line in lines)  # not a table of 28 squeezed columns


def test_findings_print_evidence_from_logs_as_text(capsys) -> None:
    finding = Finding("leak", "model_version [bold]v1[/bold]", HOSTILE, "restart \x1b[2J", 0.9, 3.0, Window(None, None))
    print_findings(FindingsResult([finding], None))
    out = capsys.readouterr().out
    assert "[bold]v1[/bold]" in out and "[red]gone[/red]" in out and "\x1b[2J" not in out
