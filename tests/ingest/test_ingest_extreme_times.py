"""One extreme timestamp must not poison the database (issue 14, item 4): a row dated year 9999 or year 1 was
committed, and from then on every ingest and `oomlab findings` ended in `OverflowError: date value out of range`.
The rows are the real serve_mixed request log's first five with two dates replaced (derived, said so)."""

from __future__ import annotations

import gzip
import json

import duckdb

from conftest import H200

ROWS = [
    json.loads(line)
    for line in gzip.decompress((H200 / "serve_mixed" / "requests.jsonl.gz").read_bytes()).splitlines()[:5]
]


def test_times_no_gpu_log_can_carry_are_rejects_and_nothing_overflows(run_cli, sql, db, tmp_path) -> None:
    rows = [dict(r) for r in ROWS]
    rows[2]["ts"], rows[3]["ts"] = "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z"
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_cli("ingest", path, "--db", db, "--quiet")
    assert result.exit_code == 0, result.output
    assert sql("SELECT rows, rejects FROM sources") == [(3, 2)]
    assert (
        f"{path}:3: ts: 9999-12-31 23:59:59 is before 2007 or more than a year ahead: no GPU log was written then"
        in result.stderr
    )
    assert f"{path}:4: ts: 0001-01-01 00:00:00 is before 2007" in result.stderr
    again = tmp_path / "more.jsonl"
    again.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert run_cli("ingest", again, "--db", db, "--quiet").exit_code == 0
    assert run_cli("findings", "--db", db).exit_code == 0


def test_a_database_an_earlier_version_poisoned_still_works(run_cli, db, tmp_path) -> None:
    path = tmp_path / "ok.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert run_cli("ingest", path, "--db", db, "--quiet").exit_code == 0
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO requests SELECT * REPLACE (TIMESTAMP '9999-12-31 23:59:59' AS ts) FROM requests LIMIT 1")
    con.close()
    again = tmp_path / "again.jsonl"
    again.write_text(json.dumps(ROWS[0] | {"request_id": "x"}) + "\n")
    result = run_cli("ingest", again, "--db", db, "--quiet")
    assert result.exit_code == 0, result.output
    assert run_cli("findings", "--db", db).exit_code == 0
