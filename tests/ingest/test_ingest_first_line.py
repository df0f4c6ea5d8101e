"""A request log whose first line is not a request (issue 14, item 2): a UTF-8 byte-order mark, an export's
comment line, or a first line cut short (a log copied from its middle) made the whole file a text log with 0
requests. Each is the real serve_mixed request log (tests/data/h200) with that first line added (derived, said
so): every request loads, the odd line is a reject naming its line."""

from __future__ import annotations

import gzip

import pytest

from conftest import H200

LOG = gzip.decompress((H200 / "serve_mixed" / "requests.jsonl.gz").read_bytes())
REQUESTS = LOG.count(b"\n")  # 101


@pytest.mark.parametrize(
    ("name", "content", "rows", "rejects"),
    [
        ("bom", b"\xef\xbb\xbf" + LOG, REQUESTS, 0),
        ("comment", b"# exported from loki 2026-11-30T02:00Z\n" + LOG, REQUESTS, 1),
        ("cut", LOG[180:300].split(b"\n")[0] + b"\n" + LOG.split(b"\n", 1)[1], REQUESTS - 1, 1),
    ],
)
def test_the_first_line_does_not_decide_the_kind(run_cli, sql, db, tmp_path, name, content, rows, rejects) -> None:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(content)
    result = run_cli("ingest", path, "--db", db, "--quiet")
    assert result.exit_code == 0, result.output
    assert sql("SELECT kind, rows, rejects FROM sources") == [("jsonl", rows, rejects)]
    if rejects:
        assert f"{path}:1: invalid JSON" in result.stderr


def test_a_text_log_with_a_json_line_stays_a_text_log(run_cli, sql, db, tmp_path) -> None:
    first = LOG.split(b"\n", 1)[0]
    path = tmp_path / "app.log"
    path.write_bytes(b"starting server\n" + first + b"\n" + b"".join(b"INFO tick %d\n" % i for i in range(30)))
    assert run_cli("ingest", path, "--db", db, "--quiet").exit_code == 0
    assert sql("SELECT kind FROM sources") == [("text",)]
