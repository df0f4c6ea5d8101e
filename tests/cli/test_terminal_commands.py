"""The terminal an on-call engineer reads (issue 37, item 6), on the real H200 captures: DuckDB's own hints kept
in `query` errors, `sources` as one compact row per file that fits 80 columns, `findings --format csv|json`, a
closed pipe ending quietly with status 141, and `--help` listing whole first sentences."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import H200

CAPTURES = [H200 / "serve_mixed" / "requests.jsonl.gz", H200 / "serve_leak", H200 / "fragmentation"]


@pytest.fixture(scope="module")
def h200_db(tmp_path_factory) -> Path:
    from click.testing import CliRunner

    from oomlab.cli.main import cli

    db = tmp_path_factory.mktemp("h200") / "h200.duckdb"
    result = CliRunner().invoke(cli, ["ingest", *map(str, CAPTURES), "--db", str(db), "--quiet"])
    assert result.exit_code == 0, result.output
    return db


def _oomlab(*args: object, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    argv = [sys.executable, "-m", "oomlab.cli.main", *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)


def test_query_errors_keep_duckdbs_own_hints(run_cli, h200_db):
    result = run_cli("query", "SELECT * FROM oom_event", "--db", h200_db)
    assert result.exit_code == 1
    assert result.output.strip() == (
        'Error: query failed: Catalog Error: Table with name oom_event does not exist! Did you mean "oom_events"?'
    )
    result = run_cli("query", "SELECT instanc FROM requests", "--db", h200_db)
    assert 'Candidate bindings: "instance"' in result.output
    assert "LINE 1" not in result.output  # the echo of the query is left out


def test_sources_is_one_compact_row_per_file_within_80_columns(h200_db):
    done = _oomlab("sources", "--db", h200_db)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    assert [c.strip() for c in lines[1].strip("┃").split("┃")] == ["path", "kind", "rows", "rej.", "device"]
    text = done.stdout
    assert "(its rows)" in text  # the request log names its own devices
    assert "gpu-a-0" in text  # the serve_leak capture's files, placed on its device by their folder
    records = _oomlab("sources", "--db", h200_db, "--format", "records").stdout
    assert records.startswith("-[ record 1 ]-") and "content_hash" in records and "placed_by" in records


def test_findings_as_csv_and_json_hold_the_same_ranked_findings(h200_db):
    as_json = json.loads(_oomlab("findings", "--db", h200_db, "--format", "json").stdout)["findings"]
    rows = list(csv.DictReader(io.StringIO(_oomlab("findings", "--db", h200_db, "--format", "csv").stdout)))
    assert len(rows) == len(as_json) > 0
    for rank, (row, finding) in enumerate(zip(rows, as_json, strict=True), start=1):
        assert (row["rank"], row["kind"], row["subject"]) == (str(rank), finding["kind"], finding["subject"])
        assert float(row["confidence"]) == finding["confidence"] and float(row["impact"]) == finding["impact"]


@pytest.mark.parametrize("fmt", ["csv", "table", "json"])
def test_a_reader_closing_the_pipe_ends_the_run_quietly_with_141(h200_db, fmt):
    """`oomlab query ... | head -c 10` over 20,000 rows (300 KB or more, beyond what a pipe holds): rich's console
    exited 1 there, as if the command had failed. Now 141 where a write met the closed pipe (CSV writes row by row), 0
    where the output had all been handed to the pipe before it closed; never an error line."""
    sql = "SELECT range AS n FROM range(20000)"
    argv = f"{sys.executable} -m oomlab.cli.main query '{sql}' --all --format {fmt} --db {h200_db}"
    done = subprocess.run(
        ["bash", "-c", f"{argv} | head -c 10 > /dev/null; echo ${{PIPESTATUS[0]}}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout.strip() == "141" if fmt == "csv" else done.stdout.strip() in ("0", "141")
    assert done.stderr == ""


def test_help_lists_each_commands_whole_first_sentence():
    done = _oomlab("--help")
    assert done.returncode == 0
    listing = done.stdout.split("Commands:", 1)[1]
    joined = " ".join(listing.split())
    assert not [line for line in listing.splitlines() if line.rstrip().endswith("...")]  # none cut short
    assert "ingest Ingest request logs, text logs with OOM messages and snapshots into the database (or, with " \
           "--lake, a Parquet lake)." in joined  # fmt: skip
    assert "weekly One run of the weekly review job: ingest what is new, pull the week from the configured " \
           "Prometheus servers, render the week's report, its incident pages and the index." in joined  # fmt: skip


def test_subgroup_help_lists_whole_first_sentences_too():
    """`oomlab report --help` cut "One OOM explained: the message decoded, its cause and..." (click's 45
    characters); every group now lists whole first sentences."""
    for group in ("report", "lake", "snapshot", "alerts"):
        done = _oomlab(group, "--help")
        assert done.returncode == 0, group
        listing = done.stdout.split("Commands:", 1)[1]
        assert not [line for line in listing.splitlines() if line.rstrip().endswith("...")], group
    joined = " ".join(_oomlab("report", "--help").stdout.split())
    assert "incident One OOM explained: the message decoded, its cause and evidence, the hours around it, the " \
           "snapshot." in joined  # fmt: skip
