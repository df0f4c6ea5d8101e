"""Bad input gets a one-line reason naming file and line; good data around it is never lost."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap

import pytest

import oomlab.ingest.requests as structured_module
import oomlab.ingest.run as ingest_module
import oomlab.load.tables as load_tables

from conftest import H200

GOOD = {"ts": "2026-11-30T01:00:00Z", "instance": "gpu-1", "batch_size": 2, "input_sequence_length": 64}


def _jsonl(path, lines):
    path.write_text("".join((json.dumps(x) if isinstance(x, dict) else x) + "\n" for x in lines))
    return path


def test_bad_lines_are_rejected_with_their_line_and_the_rest_loads(tmp_path, db, run_cli, sql):
    path = _jsonl(
        tmp_path / "mixed.jsonl",
        [
            GOOD,
            '{"ts": "2026-11-30T01:00:01Z", "batch_size": 3,',  # 2: cut off
            {**GOOD, "batch_size": "many"},  # 3: wrong type
            {"instance": "gpu-1", "batch_size": 1, "input_sequence_length": 9},  # 4: no timestamp
            "[1, 2, 3]",  # 5: not an object
            {**GOOD, "ts": "yesterday"},  # 6: unreadable time
            {**GOOD, "requested_size": "12 parsecs"},  # 7: not a size
            {**GOOD, "batch_size": 5},  # 8: fine
        ],
    )
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0
    assert sql("SELECT line, batch_size FROM requests ORDER BY line") == [(1, 2), (8, 5)]
    rejects = dict(sql("SELECT line, reason FROM rejects ORDER BY line"))
    assert rejects == {
        2: "invalid JSON",
        3: "batch_size: many is not an integer",
        4: "missing timestamp",
        5: "not a JSON object",
        6: "ts: yesterday is not a timestamp",
        7: "requested_size: 12 parsecs is not a byte size",
    }
    assert sql("SELECT raw FROM rejects WHERE line = 2") == [('{"ts": "2026-11-30T01:00:01Z", "batch_size": 3,',)]
    assert f"{path}:2: invalid JSON" in result.stderr
    assert sql("SELECT rows, rejects FROM sources") == [(2, 6)]


def test_a_type_that_changes_late_in_a_big_file_still_loads_line_by_line(tmp_path, db, run_cli, sql):
    lines = [{**GOOD, "requested_size": 1000 + i} for i in range(30000)] + [{**GOOD, "requested_size": "2 GiB"}]
    path = _jsonl(tmp_path / "late.jsonl", lines)
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT count(*), max(requested_size), max(line) FROM requests") == [(30001, 2 << 30, 30001)]


def test_blank_lines_keep_line_numbers_exact(tmp_path, db, run_cli, sql):
    path = _jsonl(tmp_path / "blank.jsonl", [GOOD, "", "   ", {**GOOD, "batch_size": 7}, "{oops"])
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT line, batch_size FROM requests ORDER BY line") == [(1, 2), (4, 7)]
    assert sql("SELECT line, reason FROM rejects") == [(5, "invalid JSON")]


def test_lines_that_are_not_utf8_are_rejected(tmp_path, db, run_cli, sql):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + b'{"ts": "\xff\xfe"}\n' + json.dumps(GOOD).encode() + b"\n")
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT line FROM requests ORDER BY line") == [(1,), (3,)]
    assert sql("SELECT line, reason LIKE 'not UTF-8 text%' FROM rejects") == [(2, True)]


def test_csv_rows_with_the_wrong_number_of_fields(tmp_path, db, run_cli, sql):
    path = tmp_path / "short.csv"
    path.write_text(
        "ts,instance,batch_size,input_sequence_length\n2026-11-30T01:00:00Z,a,1,5\n"
        "2026-11-30T01:00:01Z,a\n2026-11-30T01:00:02Z,a,3,7\n"
    )
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT line, batch_size FROM requests ORDER BY line") == [(2, 1), (4, 3)]
    assert sql("SELECT line, reason FROM rejects") == [(3, "2 fields where the header has 4")]


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("junk.bin", bytes(range(256)) * 40, "binary content that is neither a snapshot pickle nor Parquet"),
        ("broken.jsonl.gz", b"\x1f\x8b\x08\x00garbage", "cannot read"),
    ],
)
def test_whole_file_failures_name_the_file_and_other_files_still_load(
    tmp_path, db, run_cli, sql, name, content, reason
):
    bad = tmp_path / name
    bad.write_bytes(content)
    good = _jsonl(tmp_path / "good.jsonl", [GOOD])
    result = run_cli("ingest", bad, good, "--db", db)
    assert result.exit_code == 1
    assert f"error: {bad}: {reason}" in result.stderr
    assert sql("SELECT count(*) FROM requests") == [(1,)]
    assert "Traceback" not in result.output


def test_an_empty_file_is_skipped_with_a_message(tmp_path, db, run_cli):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    result = run_cli("ingest", empty, "--db", db)
    assert result.exit_code == 0
    assert f"skipped: {empty}: empty file, nothing to ingest" in result.stderr


def test_unreadable_directory_is_reported_and_the_rest_ingested(tmp_path, db, run_cli, sql, monkeypatch):
    root = tmp_path / "logs"
    (root / "locked").mkdir(parents=True)
    _jsonl(root / "good.jsonl", [GOOD])
    real_walk = os.walk

    def walk(top, onerror=None, **kwargs):  # root may read anything: simulate the permission error
        for folder, dirs, files in real_walk(top, onerror=onerror, **kwargs):
            if folder.endswith("locked"):
                onerror(PermissionError(13, "Permission denied", folder))
                continue
            yield folder, dirs, files

    monkeypatch.setattr(ingest_module.os, "walk", walk)
    result = run_cli("ingest", root, "--db", db)
    assert result.exit_code == 1
    assert f"error: {root / 'locked'}: cannot read directory: Permission denied" in result.stderr
    assert sql("SELECT count(*) FROM requests") == [(1,)]


def test_reingest_is_skipped_and_a_changed_file_replaces_its_rows(tmp_path, db, run_cli, sql):
    path = _jsonl(tmp_path / "app.jsonl", [GOOD, GOOD])
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    again = run_cli("ingest", path, "--db", db)
    assert again.exit_code == 0 and "already ingested" in again.stderr
    assert sql("SELECT count(*) FROM requests") == [(2,)]
    _jsonl(path, [GOOD, GOOD, GOOD, "{bad"])
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT count(*) FROM requests") == [(3,)]
    assert sql("SELECT count(*), min(source_id) > 1 FROM sources") == [(1, True)]
    assert sql("SELECT count(*) FROM rejects") == [(1,)]


def test_an_interrupted_ingest_leaves_no_partial_source(tmp_path, db, run_cli, sql, monkeypatch):
    path = H200 / "serve_mixed" / "requests.jsonl.gz"

    def boom(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(structured_module, "_insert_structured_ooms", boom)
    interrupted = run_cli("ingest", path, "--db", db)
    assert interrupted.exit_code == 1 and "Aborted" in interrupted.stderr
    monkeypatch.undo()
    assert sql("SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM sources)") == [(0, 0)]
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT count(*) FROM requests") == [(101,)]


def test_a_failing_structured_oom_insert_reports_its_own_error(tmp_path, db, run_cli, sql, monkeypatch):
    """A statement that fails while serve_mixed's OOM requests become events is the error reported, not a
    later statement's "transaction is aborted"; the source leaves nothing behind, and its temporary tables go
    with the rollback (a second ingest on the same connection would otherwise find them)."""
    path = H200 / "serve_mixed" / "requests.jsonl.gz"
    real = load_tables.stage_parsed_messages

    def failing(con, parsed):
        real(con, parsed)
        con.execute("SELECT CAST('not a number' AS BIGINT)")

    monkeypatch.setattr(load_tables, "stage_parsed_messages", failing)
    failed = run_cli("ingest", path, "--db", db)
    assert failed.exit_code == 1 and "Could not convert string 'not a number'" in failed.stderr, failed.stderr
    assert sql("SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM sources)") == [(0, 0)]


def test_a_second_ingest_on_a_busy_database_fails_at_once(tmp_path, db, run_cli, sql):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import duckdb, sys, time
        con = duckdb.connect({str(db)!r})
        print("locked", flush=True)
        sys.stdin.read()
    """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = run_cli("ingest", _jsonl(tmp_path / "g.jsonl", [GOOD]), "--db", db)
        assert result.exit_code == 1
        assert result.stderr.strip() == (
            f"Error: database {db} is busy: another oomlab process is using it "
            "(wait for it to finish or pass another --db)"
        )
    finally:
        holder.communicate("")
    assert run_cli("ingest", tmp_path / "g.jsonl", "--db", db).exit_code == 0
    assert sql("SELECT count(*) FROM requests") == [(1,)]


def test_gzip_without_gz_name_is_read(tmp_path, db, run_cli, sql):
    path = tmp_path / "requests.log"
    path.write_bytes(gzip.compress((json.dumps(GOOD) + "\n").encode()))
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT kind FROM sources") == [("jsonl",)]
