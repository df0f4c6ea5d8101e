"""`oomlab findings` leads with the data-quality note when rows were set aside, in its terminal output and its
JSON; over the real captures alone it prints none.

The bad data are copies of real logs with a few lines made impossible (conftest.write_impossible_copies).
"""

from __future__ import annotations

import json

from conftest import H200

NOTE = (
    "data quality: 9 request rows of 2 files set aside (impossible values: 5 allocated above the card, 3 reserved "
    "below allocated, 1 negative allocated_before) and 2 telemetry samples of 1 file set aside (impossible values: "
    "2 used above the card); see `oomlab query 'SELECT * FROM rejects'`"
)


def test_findings_print_the_note_first(impossible_db, run_cli) -> None:
    result = run_cli("findings", "--db", impossible_db)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # rich wraps lines at the terminal's width
    assert text.startswith(NOTE + " 1. ")  # before the first finding


def test_the_json_document_carries_the_note_and_its_counts(impossible_db, run_cli) -> None:
    result = run_cli("findings", "--db", impossible_db, "--json", "-")
    assert result.exit_code == 0, result.output
    quality = json.loads(result.stdout)["data_quality"]
    assert quality["note"] == NOTE and quality["set_aside_rows"] == 11
    counts = {(c["what"], c["category"]): (c["rows"], c["files"]) for c in quality["counts"]}
    assert counts == {
        ("request rows", None): (9, 2),
        ("request rows", "allocated above the card"): (5, 1),
        ("request rows", "reserved below allocated"): (3, 1),
        ("request rows", "negative allocated_before"): (1, 1),
        ("telemetry samples", None): (2, 1),
        ("telemetry samples", "used above the card"): (2, 1),
    }
    assert {c["handling"] for c in quality["counts"]} == {"set aside"}


def test_no_note_over_the_real_captures(tmp_path, run_cli) -> None:
    db = tmp_path / "real.duckdb"
    assert run_cli("ingest", *sorted(H200.glob("*/requests.jsonl.gz")), "--db", db, "--quiet").exit_code == 0
    result = run_cli("findings", "--db", db, "--json", "-")
    assert json.loads(result.stdout)["data_quality"] is None
    assert "data quality" not in run_cli("findings", "--db", db).stdout
