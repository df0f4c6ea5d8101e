"""Rows whose values no device can have are set aside at ingest with a reason naming both numbers; every other
row of the same file loads, and the real captures (PyTorch's own counters) set nothing aside.

The bad inputs are copies of real logs with a few lines made impossible (conftest.write_impossible_copies says
which and how): the sample fleet's a10-01 request log, the real H200 serve_mixed log and the real H200
nvidia-smi samples of run 2.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from oomlab.load.tables import connect
from oomlab.parse.telemetry.memory import impossible_memory
from oomlab.units import format_bytes

from conftest import FLEET, H200, IMPOSSIBLE_REJECTS, read_jsonl_gz, write_impossible_copies

GIB = 1 << 30


@pytest.fixture
def bad_db(impossible_db):
    """The bad copies ingested (conftest.impossible_db)."""
    return impossible_db


def _query(db, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_exactly_the_planted_rows_are_rejected_with_their_reasons(bad_db) -> None:
    rows = _query(
        bad_db,
        "SELECT regexp_extract(s.path, '[^/]+$'), r.line, r.reason FROM rejects r JOIN sources s USING (source_id)",
    )
    found: dict[str, dict[int, str]] = {}
    for name, line, reason in rows:
        found.setdefault(name, {})[line] = reason
    assert found == IMPOSSIBLE_REJECTS


def test_every_good_row_is_kept(bad_db) -> None:
    kept = dict(_query(bad_db, "SELECT regexp_extract(path, '[^/]+$'), rows FROM sources"))
    rejected = dict(_query(bad_db, "SELECT regexp_extract(path, '[^/]+$'), rejects FROM sources"))
    # 11,805 requests of a10-01, 101 of serve_mixed and 398 nvidia-smi samples, less the planted lines
    assert kept == {"a10-01.jsonl": 11_797, "serve_mixed.jsonl": 100, "nvsmi_gpu_run2.csv": 396}
    assert rejected == {"a10-01.jsonl": 8, "serve_mixed.jsonl": 1, "nvsmi_gpu_run2.csv": 2}
    assert _query(bad_db, "SELECT count(*) FROM requests WHERE instance = 'a10-01' AND line IN (10, 16, 20, 24)") == [
        (4,)
    ]  # the neighbours of the planted lines load
    # the real maximum of run 2 (the neighbour and the service), as captured
    assert _query(bad_db, "SELECT max(memory_used_bytes) FROM gpu_samples") == [(143_137 << 20,)]


def test_the_raw_row_of_a_reject_is_kept(bad_db) -> None:
    (raw,) = _query(bad_db, "SELECT raw FROM rejects WHERE reason LIKE 'allocated_before%'")[0]
    assert json.loads(raw)["allocated_before"] == -1024 and json.loads(raw)["request_id"] == "gpu-b-1-00007"


def test_a_peak_above_reserved_after_is_no_reject(tmp_path, db, run_cli, sql) -> None:
    # PyTorch's peak comes before the request ends; the fleet empties the cache after each request, so its peak is
    # above reserved_after on nearly every line (11,805 of a10-01's 11,805): real, not impossible.
    rows = read_jsonl_gz(FLEET / "requests" / "a10-01.jsonl.gz")[:200]
    assert sum(r["peak_allocated"] > r["reserved_after"] for r in rows) == 200
    path = tmp_path / "a10-01.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("ingest", path, "--db", db, "--quiet").exit_code == 0
    assert sql("SELECT count(*) FROM requests") == [(200,)] and sql("SELECT count(*) FROM rejects") == [(0,)]


def test_the_line_by_line_reader_sets_the_same_rows_aside(tmp_path, db, run_cli, sql) -> None:
    # A cut-off line sends the file to the robust reader; the planted lines are rejected there too.
    folder = write_impossible_copies(tmp_path / "logs")
    path = folder / "serve_mixed.jsonl"
    path.write_text(path.read_text() + '{"ts": "2026-11-30T01:51:00Z", "batch_size": 3,\n')
    assert run_cli("ingest", path, "--db", db, "--quiet").exit_code == 0
    assert sql("SELECT line, reason FROM rejects ORDER BY line") == [
        (7, "allocated_before -1.00 KiB is negative"),
        (102, "invalid JSON"),
    ]
    assert sql("SELECT count(*) FROM requests") == [(100,)]


def test_an_unreadable_and_an_impossible_value_give_both_reasons(tmp_path, db, run_cli, sql) -> None:
    row = read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")[0] | {"batch_size": "many", "peak_allocated": -5}
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps(read_jsonl_gz(H200 / "serve_mixed" / "requests.jsonl.gz")[1]))
    assert run_cli("ingest", path, "--db", db, "--quiet").exit_code == 0
    assert sql("SELECT line, reason FROM rejects") == [
        (1, "batch_size: many is not an integer; peak_allocated -5 B is negative")
    ]


def test_the_real_h200_captures_set_nothing_aside(db, run_cli, sql) -> None:
    logs = sorted(H200.glob("*/requests.jsonl.gz"))
    messages = sorted(H200.glob("*/oom_messages.txt.gz"))
    telemetry = sorted((H200 / "env").glob("nvsmi_*.csv.gz"))
    assert run_cli("ingest", *logs, *messages, *telemetry, "--db", db, "--quiet").exit_code == 0
    assert sql("SELECT count(*) FROM rejects") == [(0,)]
    assert sql("SELECT count(*) FROM requests") == [(47 + 101 + 400 + 5,)]
    assert sql("SELECT count(*) FROM stg_oom_events WHERE contradiction IS NOT NULL") == [(0,)]
    assert sql("SELECT count(*) FROM fct_request_flags") == [(0,)]


def _macro_rows(db, rows: list[dict]) -> list[tuple]:
    """(possible, reason) of each row through the two SQL macros, fields missing from a row NULL."""
    from oomlab.ingest.normalize import PHYSICAL_ARGS

    con = connect(db)
    try:
        out = []
        for row in rows:
            args = [row.get(name) for name in PHYSICAL_ARGS]
            marks = ", ".join("?" for _ in args)
            query = f"SELECT oomlab_request_possible({marks}), oomlab_request_impossible({marks})"
            out.append(con.execute(query, args + args).fetchone())
        return out
    finally:
        con.close()


def test_the_boolean_and_the_reasons_agree_on_every_condition(db) -> None:
    card = {"device_total": 24 * GIB}
    cases = [
        ({"gpu_index": -1}, "gpu_index -1 is negative"),
        ({"latency_ms": -2.5}, "latency_ms -2.5 is negative"),
        ({"batch_size": -3}, "batch_size -3 is negative"),
        ({"input_sequence_length": -1}, "input_sequence_length -1 is negative"),
        ({"output_sequence_length": -1}, "output_sequence_length -1 is negative"),
        *[
            ({name: -2048}, f"{name} -2.00 KiB is negative")
            for name in (
                "requested_size",
                "available_memory",
                "allocator_allocated",
                "reserved_memory",
                "allocated_before",
                "allocated_after",
                "reserved_before",
                "reserved_after",
                "peak_allocated",
                "device_total",
            )
        ],
        *[
            (card | {name: 26 * GIB}, f"{name} 26.00 GiB above device_total 24.00 GiB")
            for name in (
                "available_memory",
                "allocator_allocated",
                "reserved_memory",
                "allocated_before",
                "allocated_after",
                "reserved_before",
                "reserved_after",
                "peak_allocated",
            )
        ],
        # equal at two decimals: exact bytes say which is larger
        (card | {"peak_allocated": 24 * GIB + 512}, "peak_allocated 25769804288 B above device_total 25769803776 B"),
        (
            {"reserved_before": GIB, "allocated_before": 2 * GIB},
            "reserved_before 1.00 GiB below allocated_before 2.00 GiB",
        ),
        ({"reserved_after": GIB, "allocated_after": 2 * GIB}, "reserved_after 1.00 GiB below allocated_after 2.00 GiB"),
    ]
    assert _macro_rows(db, [row for row, _ in cases]) == [(False, reason) for _, reason in cases]
    fine = [
        {},  # nothing logged
        card | {"requested_size": 30 * GIB},  # a request larger than the card fails with an OOM: real
        card | {"peak_allocated": 3 * GIB, "reserved_after": GIB, "allocated_after": GIB},  # peak before a trim
        {"allocated_after": 200 * GIB, "device_total": 0},  # 0: the card's size is not known
        card | {"reserved_memory": GIB, "allocator_allocated": 2 * GIB},  # a failure's numbers are not compared
    ]
    assert _macro_rows(db, fine) == [(True, None)] * len(fine)


def test_sql_formats_bytes_as_python_does(db) -> None:
    values = [0, 512, 1023, 1024, 1536, 1048575, 23_581_097_984, 150_109_880_320, -3 * GIB, 5 << 40]
    con = connect(db)
    try:
        shown = [con.execute("SELECT oomlab_format_bytes(?::BIGINT)", [v]).fetchone()[0] for v in values]
    finally:
        con.close()
    assert shown == [format_bytes(v) for v in values]
    assert shown[6:8] == ["21.96 GiB", "139.80 GiB"]


def test_telemetry_that_no_card_shows() -> None:
    names = {
        "memory_used_bytes": "memory.used",
        "memory_total_bytes": "memory.total",
        "memory_free_bytes": "memory.free",
    }
    mib = 1 << 20
    real = {"memory_used_bytes": 141_107 * mib, "memory_total_bytes": 143_771 * mib, "memory_free_bytes": 2_050 * mib}
    assert impossible_memory(real, names) is None  # the real H200 with the neighbour: used + free < total
    assert impossible_memory(real | {"memory_free_bytes": 150_000 * mib}, names) == (
        "memory.free 146.48 GiB above memory.total 140.40 GiB"
    )
    assert impossible_memory({"used_bytes": -mib}, {"used_bytes": "used_gpu_memory"}) == (
        "used_gpu_memory -1.00 MiB is negative"
    )


def test_a_dcgm_scrape_using_more_than_its_card_is_set_aside(tmp_path, db, run_cli, sql) -> None:
    # The real H200 run 2 sample as DCGM would export it (tests/parse/test_telemetry_prom.py), FB_USED then
    # written 1024 times too large on the second GPU: the first GPU's row still loads.
    labels = 'gpu="{}",UUID="GPU-{}",modelName="NVIDIA H200",Hostname="node-1"'
    lines = [
        f"DCGM_FI_DEV_FB_USED{{{labels.format(0, 'a')}}} 141107 1796003393035",
        f"DCGM_FI_DEV_FB_FREE{{{labels.format(0, 'a')}}} 2050 1796003393035",
        f"DCGM_FI_DEV_FB_TOTAL{{{labels.format(0, 'a')}}} 143771 1796003393035",
        f"DCGM_FI_DEV_FB_USED{{{labels.format(1, 'b')}}} 144493568 1796003393035",
        f"DCGM_FI_DEV_FB_FREE{{{labels.format(1, 'b')}}} 2050 1796003393035",
        f"DCGM_FI_DEV_FB_TOTAL{{{labels.format(1, 'b')}}} 143771 1796003393035",
    ]
    path = tmp_path / "node-1.prom"
    path.write_text("# TYPE DCGM_FI_DEV_FB_USED gauge\n" + "\n".join(lines) + "\n")
    assert run_cli("ingest", path, "--db", db, "--quiet").exit_code == 0
    assert sql("SELECT gpu_index, memory_used_bytes >> 20 FROM gpu_samples") == [(0, 141_107)]
    assert sql("SELECT line, reason FROM rejects") == [
        (5, "DCGM_FI_DEV_FB_USED 137.80 TiB above DCGM_FI_DEV_FB_TOTAL 140.40 GiB")
    ]


def test_the_sample_fleet_sets_nothing_aside(fleet_con) -> None:
    # the bundled fleet and the real H200 request logs, ingested once for the session (conftest.fleet_db)
    assert fleet_con.execute("SELECT count(*) FROM rejects").fetchall() == [(0,)]
    assert fleet_con.execute("SELECT count(*) FROM requests").fetchall() == [(149_944 + 47 + 101 + 400 + 5,)]
    assert fleet_con.execute("SELECT count(*) FROM gpu_samples").fetchall()[0][0] > 0
