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
        f"{path}:3: ts: 9999-12-31 23:59:59 is before 2007 or after 2099: no GPU log was written then" in result.stderr
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


def _nvsmi_with_dates(tmp_path, dates: dict[int, str]):
    """The real H200 nvidia-smi samples of run 2 with the dates of some lines (1-based) replaced (derived)."""
    lines = gzip.decompress((H200 / "env" / "nvsmi_gpu_run2.csv.gz").read_bytes()).decode().splitlines()
    for number, date in dates.items():
        lines[number - 1] = date + lines[number - 1][len("2026/11/30") :]
    path = tmp_path / "nvsmi_gpu.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, [line[11:19] for line in lines]  # each line's time of day


def test_telemetry_and_text_log_times_get_the_same_bound(run_cli, sql, db, tmp_path) -> None:
    nvsmi, times = _nvsmi_with_dates(tmp_path, {3: "9999/12/31", 5: "1970/01/01"})
    samples = len(times) - 1
    log = tmp_path / "service.log"
    message = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 398.00 MiB."
    log.write_text(f"2026-11-30 01:50:03 ERROR {message}\n9999-12-31 23:59:59 ERROR {message}\n")
    result = run_cli("ingest", nvsmi, log, "--db", db, "--quiet")
    assert result.exit_code == 0, result.output
    assert sql("SELECT regexp_extract(path, '[^/]+$'), rows, rejects FROM sources ORDER BY 1") == [
        ("nvsmi_gpu.csv", samples - 2, 2),
        ("service.log", 1, 1),
    ]
    reasons = sql("SELECT line, reason FROM rejects ORDER BY source_id, line")
    assert reasons == [
        (3, f"ts: 9999-12-31 {times[2]} is before 2007 or after 2099: no GPU log was written then"),
        (5, f"ts: 1970-01-01 {times[4]} is before 2007 or after 2099: no GPU log was written then"),
        (2, "ts: 9999-12-31 23:59:59 is before 2007 or after 2099: no GPU log was written then"),
    ]
    assert run_cli("findings", "--db", db).exit_code == 0


def test_an_implausible_at_is_refused_before_anything_is_read(run_cli, db, tmp_path) -> None:
    path = tmp_path / "memory_stats.json"
    path.write_text("{}")
    result = run_cli("ingest", path, "--db", db, "--at", "9999-01-01T00:00")
    assert result.exit_code == 1
    assert "--at: 9999-01-01 00:00:00 is before 2007 or after 2099" in result.output
    assert "Traceback" not in result.output


def test_a_calendar_window_dated_year_9999_is_a_reject(run_cli, sql, db, tmp_path) -> None:
    path = tmp_path / "calendar.csv"
    path.write_text(
        "name,start,end,hosts\n"
        "backup,2026-11-30T01:00:00Z,2026-11-30T02:00:00Z,gpu-b-1\n"
        "backup,9999-11-30T01:00:00Z,9999-11-30T02:00:00Z,gpu-b-1\n"
    )
    assert run_cli("ingest", path, "--db", db, "--quiet").exit_code == 0
    assert sql("SELECT line, reason FROM rejects") == [
        (3, "ts: 9999-11-30 01:00:00 is before 2007 or after 2099: no GPU log was written then")
    ]
    assert sql("SELECT count(*) FROM job_occurrences WHERE origin = 'calendar'") == [(1,)]
