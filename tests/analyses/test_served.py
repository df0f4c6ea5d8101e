"""What a device served, by size (analyses.fleet.served), from a request log and from a text log's request lines
(text_requests). The inputs are the real H200 captures: their request logs as recorded, and text logs derived
from them line for line (each request as the line a service writes about it, `done status=200 ...` or
`failed status=500 ...` followed by the capture's own OOM message), so both kinds of log must give the same sizes.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from oomlab.analyses.fleet.served import served_at_least

from conftest import H200, read_jsonl_gz


def _text_log(capture: str, folder: Path) -> Path:
    """The capture's requests.jsonl as a service's text log, named after its instance (the file name is the
    instance a text log that names none is given)."""
    rows = read_jsonl_gz(H200 / capture / "requests.jsonl.gz")
    lines = []
    for r in rows:
        ts = r["ts"].rstrip("Z")
        ok = r["status"] == "ok"
        lines.append(
            f"{ts} {'INFO' if ok else 'ERROR'} [server] {r['request_id']} {'done' if ok else 'failed'} "
            f"status={200 if ok else 500} model={r['model_version']} batch={r['batch_size']} "
            f"prompt_tokens={r['input_sequence_length']} max_new_tokens={r['output_sequence_length']} "
            f"latency_ms={r['latency_ms']}"
        )
        if not ok:
            lines.append(f"{ts} ERROR torch.OutOfMemoryError: {r['error']}")
    path = folder / f"{rows[0]['instance']}.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def _ingested(run_cli, db: Path, tmp_path: Path, capture: str, kind: str) -> duckdb.DuckDBPyConnection:
    source = H200 / capture / "requests.jsonl.gz" if kind == "request log" else _text_log(capture, tmp_path)
    assert run_cli("ingest", source, "--db", db, "--quiet").exit_code == 0
    return duckdb.connect(str(db), read_only=True)


def _served(con: duckdb.DuckDBPyConnection, instance: str, version: str, tokens: int) -> tuple[int, int | None]:
    failed = pl.DataFrame({"instance": [instance], "gpu_index": [0], "model_version": [version], "tokens": [tokens]})
    (row,) = served_at_least(con, failed).iter_rows(named=True)
    return row["served_at_least"], row["served_below"]


@pytest.mark.parametrize("kind", ["request log", "text log"])
def test_a_card_edge_serves_nothing_as_large_as_its_smallest_failure(run_cli, db, tmp_path, kind):
    """serve_mixed: the smallest failure was 8 x (6736 + 16) = 54,016 tokens; nothing that large succeeded, and the
    largest success was 8 x (5891 + 16) = 47,256 (the README's bracket)."""
    con = _ingested(run_cli, db, tmp_path, "serve_mixed", kind)
    try:
        assert _served(con, "gpu-b-1", "llama-mini-v3", 54_016) == (0, 47_256)
    finally:
        con.close()


@pytest.mark.parametrize("kind", ["request log", "text log"])
def test_a_leaks_failures_are_sizes_it_served_before(run_cli, db, tmp_path, kind):
    """serve_leak: its 3 OOMs, from 4 x (1024 + 16) = 4,160 tokens, are sizes the process had served 18 times
    before the leak filled the cap (the README: requests that succeeded earlier): more than failed, so no edge. The
    largest below it was 2,304 tokens."""
    con = _ingested(run_cli, db, tmp_path, "serve_leak", kind)
    try:
        assert _served(con, "gpu-a-0", "llama-mini-v2", 4_160) == (18, 2_304)
    finally:
        con.close()


def test_a_text_logs_request_lines_are_rows_beside_its_ooms(run_cli, db, tmp_path, sql):
    """serve_mixed as a text log: 101 request lines (97 succeeded, 4 failed) beside its 4 OOM messages; the
    source's rows count both, and each OOM still names the request that failed."""
    _ingested(run_cli, db, tmp_path, "serve_mixed", "text log").close()
    assert sql("SELECT succeeded, count(*) FROM text_requests GROUP BY ALL ORDER BY ALL") == [(False, 4), (True, 97)]
    assert sql("SELECT rows FROM sources") == [(105,)]
    assert sql("SELECT count(*) FROM oom_events WHERE batch_size IS NOT NULL") == [(4,)]
    failed = sql("SELECT status, latency_ms, batch_size, input_sequence_length FROM text_requests WHERE NOT succeeded")
    assert sorted(failed) == [
        ("500", 71.0, 8, 6736),
        ("500", 79.6, 16, 3958),
        ("500", 82.7, 16, 6714),
        ("500", 158.0, 16, 4623),
    ]


def test_a_request_line_dated_where_no_gpu_log_can_be_is_a_reject(run_cli, tmp_path):
    """serve_mixed as a text log with its first request line dated 1999: that line is a reject naming its line
    and the reason, the other 100 are rows."""
    log = _text_log("serve_mixed", tmp_path)
    lines = log.read_text().splitlines()
    log.write_text("\n".join([lines[0].replace("2026-", "1999-", 1), *lines[1:]]) + "\n")
    db = tmp_path / "dated.duckdb"
    assert run_cli("ingest", log, "--db", db, "--quiet").exit_code == 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM text_requests").fetchall() == [(100,)]
        ((line, reason),) = con.execute("SELECT line, reason FROM rejects").fetchall()
    finally:
        con.close()
    assert line == 1 and reason.startswith("ts: 1999-11-30 01:49:") and "before 2007" in reason
