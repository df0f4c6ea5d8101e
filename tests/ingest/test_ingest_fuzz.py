"""Property tests: whatever bytes a file holds, ingest reports a result and never raises."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from oomlab.config import IngestOptions
from oomlab.ingest.paths import expand_paths
from oomlab.ingest.run import ingest_files
from oomlab.load.tables import connect
from oomlab.records import FAILED, INGESTED, NOTHING_FOUND, SKIPPED

GOOD = json.dumps({"ts": "2026-11-30T01:00:00Z", "batch_size": 1, "input_sequence_length": 8}).encode()
_settings = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_settings
@given(content=st.binary(max_size=2000))
def test_random_bytes_never_raise(tmp_path_factory, content):
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "input").write_bytes(content)
    con = connect(folder / "db.duckdb")
    try:
        report = ingest_files(con, expand_paths([str(folder / "input")]), IngestOptions())
    finally:
        con.close()
    assert [r.status in (INGESTED, SKIPPED, FAILED, NOTHING_FOUND) for r in report.results] == [True]


@_settings
@given(noise=st.lists(st.text(max_size=80), max_size=20))
@example(noise=["\t"])
def test_good_lines_survive_any_neighbours(tmp_path_factory, noise):
    """Request-log lines mixed with arbitrary text lines: every good line is loaded, each other one rejected."""
    folder = tmp_path_factory.mktemp("mixed")
    lines = [GOOD] + [n.replace("\n", " ").replace("\r", " ").encode() for n in noise] + [GOOD]
    (folder / "log.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    con = connect(folder / "db.duckdb")
    try:
        report = ingest_files(con, expand_paths([str(folder / "log.jsonl")]), IngestOptions())
        loaded = con.execute("SELECT line FROM requests ORDER BY line").fetchall()
        rejected = con.execute("SELECT count(*) FROM rejects").fetchall()[0][0]
    finally:
        con.close()
    assert report.results[0].status == INGESTED
    assert (1,) in loaded and (len(lines),) in loaded
    # a blank line holds only JSON whitespace: spaces and tabs (found by Hypothesis: a tab-only line is blank)
    blank = sum(1 for n in lines if not n.strip(b" \t"))
    assert len(loaded) + rejected + blank == len(lines)


def test_a_nul_byte_in_a_header_like_line(tmp_path):
    """Found by Hypothesis: csv.reader raises on NUL; detection must call it text, not crash."""
    path = tmp_path / "odd.txt"
    path.write_bytes(b"ts,batch_size\x00,input_sequence_length\nsome text\n")
    con = connect(tmp_path / "db.duckdb")
    try:
        report = ingest_files(con, expand_paths([str(path)]), IngestOptions())
    finally:
        con.close()
    assert report.results[0].status in (INGESTED, FAILED)
