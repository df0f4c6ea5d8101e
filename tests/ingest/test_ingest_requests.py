"""Structured request logs from the real H200 captures, in every supported format."""

from __future__ import annotations

import gzip
import json
import lzma
from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest
import zstandard

from conftest import H200, read_jsonl_gz

GIB = 1 << 30


def test_serve_mixed_requests_and_their_ooms(db, run_cli, sql):
    result = run_cli("ingest", H200 / "serve_mixed" / "requests.jsonl.gz", "--db", db)
    assert result.exit_code == 0, result.output
    assert sql("SELECT count(*), count(DISTINCT request_id) FROM requests") == [(101, 101)]
    oom = sql(
        "SELECT line, request_id, origin, framework, requested_bytes, free_bytes, batch_size, "
        "input_sequence_length, other_processes FROM oom_events ORDER BY line"
    )
    assert [r[0] for r in oom] == [31, 58, 92, 93]
    assert oom[0][1:8] == ("gpu-b-1-00031", "structured", "pytorch", 417333248, 295239680, 16, 4623)
    for row in oom:  # every message names the neighbour process and its 135.29 GiB
        assert row[8] == [{"pid": 1030, "in_use_bytes": round(135.29 * GIB)}]
    # Not a leak: allocated_after returns to 0.35 GiB after every request.
    assert sql("SELECT min(allocated_after), max(allocated_after) FROM requests") == [(379620352, 379620352)]


def test_logged_fields_win_over_parsed_ones(db, run_cli, sql):
    run_cli("ingest", H200 / "serve_mixed" / "requests.jsonl.gz", "--db", db)
    row = sql(
        "SELECT free_bytes, allocated_by_pytorch_bytes, reserved_unallocated_bytes, process_in_use_bytes, "
        "total_capacity_bytes FROM oom_events WHERE line = 31"
    )[0]
    # logged available_memory / allocator_allocated; the message's "281.56 MiB free" would be 295238369
    assert row[:2] == (295239680, 2521736192)
    assert row[2:] == (round(405.08 * (1 << 20)), round(4.22 * GIB), round(139.80 * GIB))


@pytest.mark.parametrize(
    ("scenario", "rows", "ooms"),
    [
        ("serve_mixed", 101, 4),
        ("serve_leak", 47, 3),
        ("cache_bloat", 400, 0),
        ("big_trace_cpp", 5, 0),
    ],
)
def test_every_fixture_request_log(db, run_cli, sql, scenario, rows, ooms):
    path = H200 / scenario / "requests.jsonl.gz"
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT count(*) FROM requests") == [(rows,)]
    assert sql("SELECT count(*) FROM oom_events WHERE origin = 'structured'") == [(ooms,)]
    first = read_jsonl_gz(path)[0]
    got = sql(
        "SELECT request_id, batch_size, input_sequence_length, allocated_after, peak_allocated, "
        "strftime(ts, '%Y-%m-%dT%H:%M:%S.%g') FROM requests WHERE line = 1"
    )[0]
    assert got == (
        first["request_id"],
        first.get("batch_size"),
        first.get("input_sequence_length"),
        first["allocated_after"],
        first.get("peak_allocated", first.get("allocated_peak")),
        first["ts"].removesuffix("Z"),
    )


def test_leak_and_cache_bloat_baselines(db, run_cli, sql):
    run_cli("ingest", H200 / "serve_leak" / "requests.jsonl.gz", H200 / "cache_bloat" / "requests.jsonl.gz", "--db", db)
    leak = sql("SELECT min(allocated_after), max(allocated_after) FROM requests WHERE instance = 'gpu-a-0'")[0]
    assert round(leak[0] / GIB, 2) == 0.42 and round(leak[1] / GIB, 1) == 4.6
    bloat = sql(
        "SELECT min(allocated_after), max(allocated_after), min(reserved_after), max(reserved_after) "
        "FROM requests WHERE instance = 'gpu-c-2'"
    )[0]
    assert bloat[:2] == (2 * GIB, 2 * GIB)
    assert (round(bloat[2] / GIB, 2), round(bloat[3] / GIB, 2)) == (2.21, 4.80)


def test_unknown_fields_are_kept_in_extra(db, run_cli, sql):
    run_cli("ingest", H200 / "serve_mixed" / "requests.jsonl.gz", "--db", db)
    extra = sql("SELECT extra->>'device_free_after' FROM requests WHERE line = 1")[0][0]
    assert int(extra) == read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")[0]["device_free_after"]


def test_a_row_without_the_extra_fields_has_no_extra_on_either_reader(tmp_path, run_cli):
    """Derived from the real serve_mixed log: its first six requests, the third without device_free_after (its one
    non-canonical field). DuckDB's typed reader and the line-by-line one (made to run by an invalid seventh line)
    store the same extra per line: the field where the line has it, NULL where it has none (no object of nulls)."""
    rows = read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")[:6]
    del rows[2]["device_free_after"]
    text = "".join(json.dumps(row) + "\n" for row in rows)
    extras = {}
    for reader, content in (("typed", text), ("line by line", text + "{not json\n")):
        log, db = tmp_path / f"{reader}.jsonl", tmp_path / f"{reader}.duckdb"
        log.write_text(content)
        run_cli("ingest", log, "--db", db)
        with duckdb.connect(str(db), read_only=True) as con:
            extras[reader] = con.execute(
                "SELECT line, extra->>'device_free_after' FROM requests ORDER BY line"
            ).fetchall()
            assert con.execute("SELECT count(*) FROM rejects").fetchall()[0][0] == (reader == "line by line")
    expected = [(i + 1, None if i == 2 else str(row["device_free_after"])) for i, row in enumerate(rows)]
    assert extras["typed"] == expected
    assert extras["line by line"] == expected


def _fixture_frame() -> pl.DataFrame:
    return pl.DataFrame(read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz"), infer_schema_length=None)


def _write(frame: pl.DataFrame, path: Path, fmt: str) -> None:
    if fmt == "csv":
        frame.write_csv(path)
    elif fmt == "parquet":
        frame.write_parquet(path)
    elif fmt == "json":
        path.write_text(json.dumps(frame.to_dicts()))
    else:
        frame.write_ndjson(path)


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json", "jsonl"])
@pytest.mark.parametrize("compression", [None, "gz", "xz", "zst"])
def test_formats_and_compressions_load_the_same_rows(tmp_path, db, run_cli, sql, fmt, compression):
    if fmt == "parquet" and compression:
        pytest.skip("Parquet compresses internally")
    plain = tmp_path / f"log.{fmt}"
    _write(_fixture_frame(), plain, fmt)
    path = _compress(plain, compression)
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0, result.output
    assert sql("SELECT count(*), sum(batch_size), sum(allocated_after), count(error) FROM requests") == [
        (
            101,
            sum(r["batch_size"] for r in read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")),
            101 * 379620352,
            4,
        )
    ]
    assert sql("SELECT kind FROM sources") == [({"jsonl": "jsonl", "json": "json"}.get(fmt, fmt),)]
    assert sql("SELECT line FROM requests WHERE request_id = 'gpu-b-1-00031'") == [(31 + (fmt == "csv"),)]
    assert sql("SELECT count(*) FROM oom_events") == [(4,)]


def _compress(path: Path, compression: str | None) -> Path:
    if compression is None:
        return path
    data = path.read_bytes()
    out = path.with_name(path.name + "." + compression)
    packed = {
        "gz": lambda: gzip.compress(data),
        "xz": lambda: lzma.compress(data),
        "zst": lambda: zstandard.ZstdCompressor().compress(data),
    }[compression]()
    # a misleading name: the compression is found from the content
    out = out.with_name(out.name.replace("." + compression, ".data"))
    out.write_bytes(packed)
    return out


def test_aliases_units_and_time_formats(tmp_path, db, run_cli, sql):
    lines = [
        {
            "@timestamp": "2026/11/30 01:49:09.001",
            "hostname": "gpu-x",
            "model": "v1",
            "batch": 4,
            "prompt_tokens": 100,
            "requested_bytes": "14.23 GiB",
            "status": "ok",
        },
        {
            "timestamp": 1764467349,
            "host": "gpu-x",
            "model": "v1",
            "batch": "8",
            "prompt_tokens": 200,
            "requested_bytes": "512MB",
            "status": "ok",
        },
        {
            "time": "2026-11-30T02:49:09+01:00",
            "host": "gpu-x",
            "model": "v1",
            "batch": 2.0,
            "prompt_tokens": 50,
            "requested_bytes": "1.5e9",
            "status": "ok",
        },
    ]
    path = tmp_path / "aliases.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    rows = sql(
        "SELECT line, strftime(ts, '%Y-%m-%d %H:%M:%S.%g'), instance, model_version, batch_size, "
        "input_sequence_length, requested_size FROM requests ORDER BY line"
    )
    assert rows == [
        (1, "2026-11-30 01:49:09.001", "gpu-x", "v1", 4, 100, round(14.23 * GIB)),
        (2, "2025-11-30 01:49:09.000", "gpu-x", "v1", 8, 200, 512 << 20),
        (3, "2026-11-30 01:49:09.000", "gpu-x", "v1", 2, 50, 1_500_000_000),
    ]


def test_naive_timestamps_read_in_tz(tmp_path, db, run_cli, sql):
    path = tmp_path / "tz.csv"
    path.write_text("ts,pod,batch_size,input_sequence_length\n2026-07-01 12:00:00,p1,1,10\n")
    assert run_cli("ingest", path, "--db", db, "--tz", "Europe/Berlin").exit_code == 0
    assert sql("SELECT strftime(ts, '%H:%M'), instance FROM requests") == [("10:00", "p1")]


def test_user_mapping_by_option_and_file(tmp_path, db, run_cli, sql):
    path = tmp_path / "theirs.csv"
    path.write_text("when,box,bsz,toks,kv_bytes\n2026-11-30T01:00:00Z,gpu-9,3,700,2 GiB\n")
    mapping = tmp_path / "map.toml"
    mapping.write_text('[fields]\ninstance = "box"\nbatch_size = "bsz"\n')
    result = run_cli(
        "ingest",
        path,
        "--db",
        db,
        "--mapping",
        mapping,
        "--map",
        "ts=when",
        "--map",
        "input_sequence_length=toks",
        "--map",
        "requested_size=kv_bytes",
    )
    assert result.exit_code == 0, result.output
    assert sql("SELECT instance, batch_size, input_sequence_length, requested_size, extra FROM requests") == [
        ("gpu-9", 3, 700, 2 * GIB, None)
    ]


def test_labels_fill_missing_instance_and_model_version(tmp_path, db, run_cli, sql):
    path = tmp_path / "node-7.jsonl"
    path.write_text('{"ts": "2026-11-30T01:00:00Z", "batch_size": 1, "input_sequence_length": 5}\n')
    run_cli("ingest", path, "--db", db, "--model-version", "m-3", "--tag", "team=infra")
    assert sql("SELECT instance, model_version FROM requests") == [("node-7", "m-3")]
    labels = json.loads(sql("SELECT labels FROM sources")[0][0])
    assert labels == {"instance": "node-7", "model_version": "m-3", "tags": {"team": "infra"}}


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_line_numbers_follow_the_file_across_parallel_row_groups(tmp_path, db, run_cli, sql, fmt):
    """300,000 rows span several DuckDB row groups read in parallel: every row keeps its own line."""
    rows = 300_000
    frame = pl.DataFrame(
        {
            "ts": [f"2026-11-30T01:{i // 6000 % 60:02d}:{i // 100 % 60:02d}Z" for i in range(rows)],
            "request_id": [f"r{i}" for i in range(rows)],
            "batch_size": [i % 16 + 1 for i in range(rows)],
            "input_sequence_length": list(range(rows)),
        }
    )
    path = tmp_path / f"many.{fmt}"
    _write(frame, path, fmt)
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    header = 1 if fmt == "csv" else 0
    assert sql("SELECT count(*), count(*) FILTER (line = input_sequence_length + 1 + ?) FROM requests", [header]) == [
        (rows, rows)
    ]


def test_an_oom_request_without_its_message_is_still_an_oom_event(tmp_path, db, run_cli, sql):
    rows = read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")
    oom = next(r for r in rows if r.get("status") == "oom")
    quiet = {k: v for k, v in oom.items() if k != "error"}  # the same real request, its message not logged
    path = tmp_path / "quiet.jsonl"
    path.write_text(json.dumps(quiet) + "\n" + json.dumps(rows[0]) + "\n")
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT line, origin, framework, requested_bytes, message FROM oom_events") == [
        (1, "structured", None, oom["requested_size"], None)
    ]


def test_offset_timestamps_are_stored_as_their_utc_instant(tmp_path, db, run_cli, sql):
    """serve_mixed's first requests with their times written three ways DuckDB's reader types as TIMESTAMP WITH
    TIME ZONE: `Z`, a +02:00 offset for the same kind of instant, and `infinity`, which no log means and which is
    rejected as implausible, not stored without a time."""
    rows = read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")[:3]
    rows[1]["ts"] = "2026-11-30T03:49:09.125+02:00"
    rows[2]["ts"] = "infinity"
    log = tmp_path / "offsets.jsonl"
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run_cli("ingest", log, "--db", db)
    assert result.exit_code == 0, result.output
    first = datetime.fromisoformat(rows[0]["ts"].replace("Z", "+00:00")).replace(tzinfo=None)
    second = datetime(2026, 11, 30, 1, 49, 9, 125000)
    assert sql("SELECT line, ts FROM requests ORDER BY line") == [(1, first), (2, second)]
    (reason,) = sql("SELECT reason FROM rejects WHERE line = 3")[0]
    assert "after 2099" in reason
