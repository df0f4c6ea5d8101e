"""Hostile and careless request logs (issue 14 items 1, 3, 11): one odd value is a reject of its own row, or is
read on its own merits; it never costs the other rows of its file, nor the other files of the same call.

Every hostile file is the real H200 serve_mixed request log (101 requests, tests/data/h200/serve_mixed) with one
line changed as each test says; the real cache_bloat log (400 requests) is ingested in the same call as the
good file, and must load whole.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomlab import api
from oomlab.config import IngestOptions
from oomlab.ingest import requests as request_ingest

from conftest import H200

SERVE_MIXED = H200 / "serve_mixed" / "requests.jsonl.gz"
GOOD = H200 / "cache_bloat" / "requests.jsonl.gz"
GOOD_ROWS = 400
ROWS = 101


def _lines() -> list[str]:
    """serve_mixed's lines as captured."""
    with gzip.open(SERVE_MIXED, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def _records() -> list[dict]:
    return [json.loads(line) for line in _lines()]


def _write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _with_line(tmp_path: Path, number: int, text: str, name: str = "hostile.jsonl") -> Path:
    """serve_mixed with line `number` (1-based) replaced by `text`."""
    lines = _lines()
    lines[number - 1] = text
    return _write_jsonl(tmp_path / name, lines)


def _with_value(tmp_path: Path, number: int, key: str, value: object) -> Path:
    """serve_mixed with one field of line `number` set to `value` (written by json.dumps)."""
    record = _records()[number - 1]
    record[key] = value
    return _with_line(tmp_path, number, json.dumps(record))


def _ingest(run_cli, db: Path, *paths: Path):
    result = run_cli("ingest", *paths, GOOD, "--db", db)
    assert "Traceback" not in result.output
    return result


def _counts(sql, name: str) -> tuple[int, int]:
    return sql("SELECT rows, rejects FROM sources WHERE path LIKE ?", [f"%/{name}"])[0]


def _good_file_whole(sql) -> None:
    assert _counts(sql, "requests.jsonl.gz") == (GOOD_ROWS, 0)


def _rejects(sql) -> list[tuple[int, str]]:
    return sql("SELECT line, reason FROM rejects ORDER BY line")


# --- item 1: mixed representations in one column, read value by value ---------------------------------------


def test_an_epoch_number_among_iso_times_is_read_as_a_time(tmp_path, db, run_cli, sql) -> None:
    # line 1 is in DuckDB's type sample, so the reader types `ts` JSON: each value is then read on its own
    first = _records()[0]
    assert first["ts"] == "2026-11-30T01:49:50.810Z"
    epoch = datetime(2026, 11, 30, 1, 49, 50, 810000, tzinfo=UTC).timestamp()
    path = _with_value(tmp_path, 1, "ts", epoch)
    result = _ingest(run_cli, db, path)
    assert result.exit_code == 0
    assert _counts(sql, "hostile.jsonl") == (ROWS, 0)
    _good_file_whole(sql)
    (ts,) = sql(
        "SELECT strftime(ts, '%Y-%m-%dT%H:%M:%S.%g') FROM requests WHERE request_id = ?", [first["request_id"]]
    )[0]
    assert ts == "2026-11-30T01:49:50.810"


def test_a_size_with_a_unit_among_integers_is_read_as_bytes(tmp_path, db, run_cli, sql) -> None:
    first = _records()[0]
    assert first["reserved_before"] == 742 << 20  # the real value, written with its unit instead
    path = _with_value(tmp_path, 1, "reserved_before", "742 MiB")
    assert _ingest(run_cli, db, path).exit_code == 0
    assert _counts(sql, "hostile.jsonl") == (ROWS, 0)
    assert sql("SELECT reserved_before FROM requests WHERE line = 1 AND instance = 'gpu-b-1'") == [(742 << 20,)]
    # the other rows keep the integers they logged
    assert sql("SELECT sum(reserved_before) FROM requests WHERE instance = 'gpu-b-1'") == [
        (sum(r["reserved_before"] for r in _records()),)
    ]


# --- item 3: one bad value fails only its row ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("allocated_before", 2**63, "allocated_before: 9223372036854775808 is not a byte size in range"),
        ("allocated_before", 1e30, "allocated_before: 1e+30 is not a byte size in range"),
        ("batch_size", 2**70, "batch_size: 1.1805916207174113e+21 is not a whole number in range"),
        ("batch_size", True, "batch_size: true is not an integer"),
        ("ts", 1e30, "ts: 1e30 is not a timestamp in range"),
    ],
)
def test_a_value_no_column_can_hold_rejects_its_row_only(tmp_path, db, run_cli, sql, key, value, reason) -> None:
    path = _with_value(tmp_path, 7, key, value)
    result = _ingest(run_cli, db, path)
    assert result.exit_code == 0
    assert _rejects(sql) == [(7, reason)]
    assert f"rejected: {path}:7: {reason}" in result.stderr
    assert _counts(sql, "hostile.jsonl") == (ROWS - 1, 1)
    _good_file_whole(sql)


def test_the_same_values_late_in_a_file_reject_their_row_only(tmp_path, db, run_cli, sql) -> None:
    # after DuckDB's type sample (20,480 rows) a value of another type fails its typed reader: the file is then
    # read line by line, and only that line is set aside
    base = _records()[0]
    lines = [json.dumps({**base, "request_id": f"r{i}"}) for i in range(21_000)]
    lines[20_990] = json.dumps({**base, "request_id": "late", "allocated_before": 2**64})
    path = _write_jsonl(tmp_path / "late.jsonl", lines)
    assert _ingest(run_cli, db, path).exit_code == 0
    assert _rejects(sql) == [(20_991, "allocated_before: 18446744073709551616 is not a byte size in range")]
    assert _counts(sql, "late.jsonl") == (20_999, 1)


def test_a_line_ended_by_a_bare_carriage_return_is_one_reject(tmp_path, db, run_cli, sql) -> None:
    # lines 10 and 11 joined by CR alone: LF ends a line (as wc -l and grep -n count), so this is one line that
    # holds two JSON documents
    lines = _lines()
    lines[9:11] = [lines[9] + "\r" + lines[10]]
    path = _write_jsonl(tmp_path / "hostile.jsonl", lines)
    result = _ingest(run_cli, db, path)
    assert result.exit_code == 0
    assert _rejects(sql) == [(10, "invalid JSON")]
    assert _counts(sql, "hostile.jsonl") == (ROWS - 2, 1)
    # the line numbers after it are the file's own: line 11 holds serve_mixed's 12th request
    assert sql("SELECT line FROM requests WHERE request_id = ?", [_records()[11]["request_id"]]) == [(11,)]


def test_a_carriage_return_inside_a_string_is_kept(tmp_path, db, run_cli, sql) -> None:
    path = _with_value(tmp_path, 3, "error", "first\rsecond")
    assert _ingest(run_cli, db, path).exit_code == 0
    assert _counts(sql, "hostile.jsonl") == (ROWS, 0)
    assert sql("SELECT error FROM requests WHERE error LIKE 'first%'") == [("first\rsecond",)]


def test_a_line_over_the_record_limit_is_a_reject(tmp_path, db, run_cli, sql) -> None:
    # 40 MiB: over MAX_RECORD_BYTES (16 MiB) and over what DuckDB's JSON reader buffers (twice its limit), so the
    # typed reader refuses the file and the line-by-line reader rejects the line, holding at most 16 MiB of it
    path = _with_value(tmp_path, 5, "prompt", "x" * (40 << 20))
    length = len(_lines_of(path)[4])
    result = _ingest(run_cli, db, path)
    assert result.exit_code == 0
    assert _rejects(sql) == [(5, f"a line of {length + 1:,} bytes: over the 16,777,216 a request record can take")]
    assert _counts(sql, "hostile.jsonl") == (ROWS - 1, 1)
    _good_file_whole(sql)


def test_the_line_reader_rejects_lines_over_its_limit(tmp_path, db, run_cli, sql, monkeypatch) -> None:
    # the limit lowered so that the test writes 600 KB; an invalid line sends the file to the line reader (DuckDB's
    # typed reader takes lines up to twice its buffer whatever the limit)
    limit = 256 << 10
    monkeypatch.setattr(request_ingest, "MAX_RECORD_BYTES", limit)
    path = _with_value(tmp_path, 5, "prompt", "x" * (600 << 10))
    lines = _lines_of(path)
    lines[7] = lines[7][:-1]  # line 8 cut short
    _write_jsonl(path, lines)
    assert _ingest(run_cli, db, path).exit_code == 0
    length = len(lines[4]) + 1
    assert _rejects(sql) == [
        (5, f"a line of {length:,} bytes: over the {limit:,} a request record can take"),
        (8, "invalid JSON"),
    ]
    assert _counts(sql, "hostile.jsonl") == (ROWS - 2, 2)


def _lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_a_line_without_a_newline_longer_than_the_limit_costs_one_reject(
    tmp_path, db, run_cli, sql, monkeypatch
) -> None:
    limit = 64 << 10
    monkeypatch.setattr(request_ingest, "MAX_RECORD_BYTES", limit)
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(
        "".join(line + "\n" for line in _lines()).encode() + b"{" * (1 << 20)
    )  # a last line of 1 MiB, no newline
    assert _ingest(run_cli, db, path).exit_code == 0
    assert _rejects(sql) == [(ROWS + 1, f"a line of {1 << 20:,} bytes: over the {limit:,} a request record can take")]
    assert _counts(sql, "hostile.jsonl") == (ROWS, 1)


# --- item 11: a key given twice -------------------------------------------------------------------------------


def test_a_key_given_twice_is_a_reject_naming_it(tmp_path, db, run_cli, sql) -> None:
    text = json.dumps(_records()[3])
    path = _with_line(tmp_path, 4, text[:-1] + ', "batch_size": 64}')
    assert _ingest(run_cli, db, path).exit_code == 0
    assert _rejects(sql) == [(4, 'the key "batch_size" is given twice: which value is meant is unknown')]
    assert _counts(sql, "hostile.jsonl") == (ROWS - 1, 1)


def test_a_file_changed_to_equal_another_loses_its_old_rows(tmp_path, db, run_cli, sql) -> None:
    first = _write_jsonl(tmp_path / "a.jsonl", _lines()[:10])
    second = _write_jsonl(tmp_path / "b.jsonl", _lines()[10:30])
    assert run_cli("ingest", first, second, "--db", db).exit_code == 0
    assert sql("SELECT count(*) FROM requests") == [(30,)]
    first.write_bytes(second.read_bytes())  # a.jsonl now holds what b.jsonl does
    result = run_cli("ingest", first, "--db", db)
    assert result.exit_code == 0
    assert f"its content changed to that of {second.resolve()}, already ingested" in result.output
    assert sql("SELECT count(*) FROM requests") == [(20,)]  # b's rows once; a's old ten are gone
    assert sql("SELECT regexp_extract(path, '[^/]+$') FROM sources") == [("b.jsonl",)]


def test_an_unchanged_file_ingested_under_another_instance_is_relabelled(tmp_path, db, run_cli, sql) -> None:
    path = _write_jsonl(
        tmp_path / "log.jsonl", [json.dumps({k: v for k, v in r.items() if k != "instance"}) for r in _records()]
    )
    assert run_cli("ingest", path, "--db", db, "--instance", "old-name").exit_code == 0
    again = run_cli("ingest", path, "--db", db, "--instance", "old-name")
    assert "already ingested" in again.output
    assert run_cli("ingest", path, "--db", db, "--instance", "new-name").exit_code == 0
    assert sql("SELECT instance, count(*) FROM requests GROUP BY 1") == [("new-name", ROWS)]
    assert sql("SELECT count(*), any_value(labels->>'instance') FROM sources") == [(1, "new-name")]


# --- CSV ----------------------------------------------------------------------------------------------------

_CSV_KEYS = ["ts", "request_id", "batch_size", "input_sequence_length", "allocated_before", "status"]


def _write_csv(path: Path, rows: list[list[object]]) -> Path:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_CSV_KEYS)
    writer.writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def _csv_rows() -> list[list[object]]:
    return [[r[k] for k in _CSV_KEYS] for r in _records()]


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("allocated_before", "1e30", "allocated_before: 1e+30 is not a byte size in range"),  # typed DOUBLE
        ("allocated_before", str(2**63), "allocated_before: 9223372036854775808 is not a byte size in range"),
        ("batch_size", "true", "batch_size: true is not an integer"),
    ],
)
def test_csv_a_bad_value_rejects_its_row_only(tmp_path, db, run_cli, sql, column, value, reason) -> None:
    rows = _csv_rows()
    rows[5][_CSV_KEYS.index(column)] = value
    path = _write_csv(tmp_path / "hostile.csv", rows)
    assert _ingest(run_cli, db, path).exit_code == 0
    assert _rejects(sql) == [(7, reason)]  # line 7: the header is line 1
    assert _counts(sql, "hostile.csv") == (ROWS - 1, 1)
    _good_file_whole(sql)


def test_csv_mixed_time_and_size_representations_load(tmp_path, db, run_cli, sql) -> None:
    rows = _csv_rows()
    rows[0][0] = "1764467390.81"
    rows[1][_CSV_KEYS.index("allocated_before")] = "3.5 GiB"
    path = _write_csv(tmp_path / "hostile.csv", rows)
    assert _ingest(run_cli, db, path).exit_code == 0
    assert _counts(sql, "hostile.csv") == (ROWS, 0)
    assert sql("SELECT allocated_before FROM requests WHERE line = 3 AND instance = 'hostile'") == [
        (int(3.5 * (1 << 30)),)
    ]


def test_csv_a_long_field_is_read_fast_and_a_bare_cr_is_one_reject(tmp_path, db, run_cli, sql) -> None:
    # a 1 MB field in DuckDB's sniff sample (its sniffer is quadratic in a field's length) and a field over the
    # csv module's default 128 KiB limit: both read; a CR that joins two rows makes that line a reject
    rows = _csv_rows()
    rows[2][_CSV_KEYS.index("status")] = "x" * (1 << 20)
    path = _write_csv(tmp_path / "hostile.csv", rows)
    text = path.read_text().split("\n")
    text[20:22] = [text[20] + "\r" + text[21]]
    path.write_text("\n".join(text))
    assert _ingest(run_cli, db, path).exit_code == 0
    ((line, reason),) = _rejects(sql)
    assert line == 21 and reason.startswith("not a CSV row: new-line character seen in unquoted field")
    assert _counts(sql, "hostile.csv") == (ROWS - 2, 1)
    assert sql("SELECT length(status) FROM requests WHERE line = 4 AND instance = 'hostile'") == [(1 << 20,)]


def test_csv_a_header_naming_a_column_twice_fails_the_file_only(tmp_path, db, run_cli, sql) -> None:
    path = tmp_path / "hostile.csv"
    path.write_text("ts,request_id,batch_size,input_sequence_length,batch_size\n2026-11-30T01:49:50Z,a,1,5,2\n")
    result = _ingest(run_cli, db, path)
    assert result.exit_code == 1
    assert (
        f"error: {path}: line 1: the header names batch_size twice: which column is meant is unknown" in result.stderr
    )
    _good_file_whole(sql)


# --- properties ---------------------------------------------------------------------------------------------

_ODD_VALUES = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.sampled_from(["3.5 GiB", "1e30", "", " ", "2026-11-30T01:49:50Z", "NaN", "-0", "0x10"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    line=st.integers(min_value=1, max_value=ROWS),
    key=st.sampled_from(["ts", "batch_size", "input_sequence_length", "allocated_before", "latency_ms", "status"]),
    value=_ODD_VALUES,
)
def test_property_one_odd_value_costs_at_most_its_own_row(tmp_path_factory, line, key, value) -> None:
    folder = tmp_path_factory.mktemp("odd")
    path = _with_value(folder, line, key, value)
    report = api.ingest(folder / "odd.duckdb", [str(path)], IngestOptions())
    (result,) = report.results
    assert result.status == "ingested", result.message
    assert result.rows + result.rejects == ROWS
    assert result.rejects <= 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    row=st.integers(min_value=0, max_value=ROWS - 1),
    column=st.sampled_from(_CSV_KEYS),
    value=st.text(max_size=40) | st.sampled_from(["3.5 GiB", "1e30", str(2**64), "true", "1764467390.81", '"', "\r"]),
)
def test_property_one_odd_csv_cell_costs_at_most_its_own_row(tmp_path_factory, row, column, value) -> None:
    folder = tmp_path_factory.mktemp("odd_csv")
    rows = _csv_rows()
    rows[row][_CSV_KEYS.index(column)] = value
    path = _write_csv(folder / "odd.csv", rows)
    report = api.ingest(folder / "odd.duckdb", [str(path)], IngestOptions())
    (result,) = report.results
    assert result.status == "ingested", result.message
    assert result.rows + result.rejects == ROWS
    assert result.rejects <= 1
