"""What the CLI prints from the data is text, never markup or terminal control (issue 14, item 9): rich markup
in an error text crashed `oomlab query` or vanished, raw ANSI escapes from logs reached the terminal, and a
wide result printed as a wall of empty cells on an 80-column terminal."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from oomlab.api import FindingsResult
from oomlab.cli.main import cli
from oomlab.cli.render_findings import print_findings
from oomlab.cli.terminal import fold_name, visible
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
    print_findings(FindingsResult([finding], None), verbose=True)
    out = capsys.readouterr().out
    assert "[bold]v1[/bold]" in out and "[red]gone[/red]" in out and "\x1b[2J" not in out


def test_fold_name_breaks_only_after_separators() -> None:
    frame = "/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/modules/module.py:_call_impl:1790"
    lines = fold_name(frame, 40).split("\n")
    assert "".join(lines) == frame and all(len(line) <= 40 for line in lines)
    assert all(line.endswith(("/", ":")) for line in lines[:-1]) and lines[-1] == "module.py:_call_impl:1790"
    assert fold_name("a" * 30, 10) == "a" * 9 + "\u2026"  # one name longer than the line: cut, marked


def test_snapshot_sites_fold_whole_at_80_columns(monkeypatch) -> None:
    """The real H200 snapshot's sites on an 80-column terminal: `modeling_llama.py:forward:122` was printed as
    `forward:12` and `2` on the next line; each site now reads whole when its lines are joined, and each
    frame of `--stacks` too."""
    monkeypatch.setenv("COLUMNS", "80")
    snapshot = H200 / "serve_leak" / "snapshot_first_oom.pickle.gz"
    result = CliRunner().invoke(cli, ["snapshot", "inspect", str(snapshot), "--stacks"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    table = result.stdout.split("top allocation sites (live)")[1].split("leak suspects")[0]
    cells = [line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│")]
    sites, current = [], ""
    for cell, line in zip(cells, [line for line in table.splitlines() if line.startswith("│")], strict=True):
        current += cell
        if line.split("│")[2].strip():  # a row's first line carries its bytes; continuation lines do not
            sites.append(current)
            current = ""
        elif sites:
            sites[-1] += cell
            current = ""
    assert "transformers/models/llama/modeling_llama.py:forward:122" in sites
    assert all(len(line) <= 80 for line in result.stdout.splitlines() if line.startswith(("│", "      /")))
    assert "      /srv/app/scenarios.py:generate:117  <- the service's own code" in result.stdout.splitlines()


def test_ingest_summary_folds_paths_at_slashes_at_80_columns(monkeypatch, tmp_path) -> None:
    """The ingest summary broke `/work/.../h200/cach` and `e_bloat/requests.jsonl.gz` across lines; a source now
    folds after its slashes, and a file name longer than the column is cut with an ellipsis, never split."""
    monkeypatch.setenv("COLUMNS", "80")
    args = ["ingest", str(H200 / "cache_bloat"), str(H200 / "fragmentation"), "--db", str(tmp_path / "t.duckdb")]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = [line.split("│")[1:-1] for line in result.stdout.splitlines() if line.startswith("│")]
    sources, current = [], ""
    for row in rows:
        if row[1].strip() and current:
            sources.append(current)
            current = ""
        current += row[0].strip()
    sources.append(current)
    assert all(len(line) <= 80 for line in result.stdout.splitlines() if line.startswith("│"))
    for source in sources:
        assert source.startswith(str(H200)) or source.startswith("tests/"), source
        name = source.rsplit("/", 1)[-1]
        assert name.endswith(".gz") or name.endswith("\u2026"), source  # whole, or visibly cut
    assert any(s.endswith("/cache_bloat/requests.jsonl.gz") for s in sources)


def test_sources_keep_their_paths_and_counts_at_80_columns(monkeypatch, tmp_path) -> None:
    """Files whose long names stand in for their devices (real corpus cases under their folder names, as a user
    dumping logs in one folder has them) squeezed `oomlab sources`' path column to nothing and its headers to `k…`,
    `ro…`: the path keeps its width and the device folds."""
    realworld = Path(__file__).resolve().parents[1] / "cases" / "realworld" / "allocator"
    for folder in sorted(realworld.glob("00[1-3]_*")):
        (tmp_path / f"{folder.name}.txt").write_bytes((folder / "artifact.txt").read_bytes())
    db = tmp_path / "s.duckdb"
    assert CliRunner().invoke(cli, ["ingest", str(tmp_path), "--db", str(db), "--quiet"]).exit_code == 0
    monkeypatch.setenv("COLUMNS", "80")
    shown = CliRunner().invoke(cli, ["sources", "--db", str(db)], catch_exceptions=False).stdout
    header = next(line for line in shown.splitlines() if line.startswith("┃"))
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == ["path", "kind", "rows", "rej.", "device"]
    assert all(len(line) <= 80 for line in shown.splitlines())
    rows = [line.split("│")[1:-1] for line in shown.splitlines() if line.startswith("│")]
    assert [r[2].strip() for r in rows if r[2].strip()] == ["3", "3", "6"]
