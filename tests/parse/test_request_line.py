"""The failing request a text log names just before its traceback (parse.text.request_line), and the scan that
attaches it to the OOM message found after it. The message is a real one: the third OOM of the H200 serve_leak
capture (tests/data/h200/serve_leak/oom_messages.txt); the lines around it are a service's, as a log would hold
them, with the request's fields taken from the capture's request log (requests.jsonl, request gpu-a-0-00047)."""

from __future__ import annotations

import gzip
from datetime import datetime

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oomlab.parse.text.request_line import READ_FIELDS, logged_request, request_fields, succeeded
from oomlab.parse.text.request_lines import RequestScanner, read_request_lines
from oomlab.parse.text.textlog import REQUEST_REACH, scan_text_log
from oomlab.records import TextOom

from conftest import H200


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "2026-11-30T01:49:37.866 ERROR gpu-a-0-00047 failed status=500 model=llama-mini-v2 batch=8 "
            "prompt_tokens=1024 max_new_tokens=32",
            {
                "model_version": "llama-mini-v2",
                "batch_size": "8",
                "input_sequence_length": "1024",
                "output_sequence_length": "32",
            },
        ),
        (
            '{"level": "error", "request_id": "gpu-a-0-00047", "model": "llama-mini-v2", "batch_size": 8, '
            '"input_len": 1024}',
            {
                "request_id": "gpu-a-0-00047",
                "model_version": "llama-mini-v2",
                "batch_size": "8",
                "input_sequence_length": "1024",
            },
        ),
        ('msg="generate" model="llama mini" bs=4', {"model_version": "llama mini", "batch_size": "4"}),
    ],
)
def test_a_request_line_names_the_request(line, expected):
    assert request_fields(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "INFO serving model=llama-mini-v2 on cuda:0",  # no size: a start-up line, not a request
        "prefix_batch=8 my_prompt_tokens=12",  # keys that only end in a field's name
        "batch=12345678901 model=m",  # no batch is ten digits long
        "batch=eight model=m",
    ],
)
def test_a_line_without_a_request_size_is_no_request_line(line):
    assert request_fields(line) is None


def test_a_line_about_a_request_that_succeeded_is_not_the_failing_one():
    assert request_fields("gpu-a-0-00046 done status=200 model=llama-mini-v2 batch=4 prompt_tokens=512") == {}
    assert request_fields('"GET /health HTTP/1.1" status=200') == {}  # no size: still another request's line


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "2026-11-30T01:49:36.1 INFO gpu-a-0-00046 done status=200 model=llama-mini-v2 batch=4 prompt_tokens=1024 "
            "max_new_tokens=16 latency_ms=1480.1",
            {
                "request_id": None,
                "status": "200",
                "model_version": "llama-mini-v2",
                "batch_size": "4",
                "input_sequence_length": "1024",
                "output_sequence_length": "16",
                "latency_ms": "1480.1",
            },
        ),
        (
            '{"req_id": "r-9", "state": "ok", "bs": 2, "input_len": 64, "duration_ms": 12}',
            {"request_id": "r-9", "status": "ok", "batch_size": "2", "input_sequence_length": "64", "latency_ms": "12"},
        ),
        ("status=500 batch=8 latency_ms=-3", {"status": "500", "batch_size": "8"}),  # no latency is negative
    ],
)
def test_a_request_line_states_its_outcome_and_latency(line, expected):
    assert logged_request(line) == {k: v for k, v in expected.items() if v is not None}


@pytest.mark.parametrize(("status", "ok"), [("200", True), ("ok", True), ("Done", True), ("500", False), (None, False)])
def test_only_a_status_of_success_says_a_request_succeeded(status, ok):
    assert succeeded(status) is ok


def test_the_scan_keeps_request_lines_that_state_how_the_request_ended(tmp_path):
    """A line naming tokens with no outcome (a throughput report, `finished` with no status) is no request line;
    one that states a status with no size is none either (an HTTP access line)."""
    log = tmp_path / "server.log"
    log.write_text(
        "2026-11-30T01:49:36 INFO r-1 done status=200 model=m batch=4 prompt_tokens=1024\n"
        "2026-11-30T01:49:37 INFO request r-2 finished in 12 ms, prompt_tokens=77 completion_tokens=3\n"
        "2026-11-30T01:49:38 INFO GET /health status=200 latency_ms=1\n"
        "2026-11-30T01:49:39 ERROR r-3 failed status=500 model=m batch=8 prompt_tokens=4096\n"
    )
    scanner = RequestScanner(lambda text: None, (datetime(2007, 1, 1), datetime(2100, 1, 1)))
    for _ in scan_text_log(log, on_window=scanner.window):
        pass
    read = scanner.take()
    assert read is not None
    assert read.select("line", "status", "batch_size", "succeeded").rows() == [
        (1, "200", "4", True),
        (4, "500", "8", False),
    ]


# Lines the bulk reader must read as logged_request does: the generator's, JSON, logfmt with quotes, a key right
# after a closing quote, a quoted key inside a value, keys that only end in a field's name, invalid sizes first.
_LINES = [
    "2026-11-30T01:49:36.1 INFO gpu-a-0-00046 done status=200 model=llama-mini-v2 batch=4 prompt_tokens=1024 "
    "max_new_tokens=16 latency_ms=1480.1",
    '{"req_id": "r-9", "state": "ok", "bs": 2, "input_len": 64, "duration_ms": 12}',
    'msg="generate" model="llama mini" bs=4 status="  done "',
    'a="x"status=500 batch=8',
    'note="batch=4 status=200" batch=8 status=failed',
    "prefix_batch=8 my_status=200 batch=2 status=ok",
    "batch=eight batch=3 latency_ms=-3 latency_ms=7 status=200",
    "x.batch=4 status=200 input_len=5",
    '"status": "500", "batch_size": "12", "model": "m"',
    "status=200",
    "batch=1",
    "",
]


def _bulk(lines: list[str]) -> list[dict[str, str] | None]:
    """`read_request_lines` per line: its fields as logged_request gives them, None for a line it skips."""
    read = read_request_lines(pl.Series(lines, dtype=pl.Utf8))
    by_offset = {
        row["offset"]: {k: row[k] for k in READ_FIELDS if row[k] is not None} for row in read.iter_rows(named=True)
    }
    return [by_offset.get(i) for i in range(len(lines))]


def _one_by_one(lines: list[str]) -> list[dict[str, str] | None]:
    out = []
    for line in lines:
        fields = logged_request(line)
        out.append(fields if fields is not None and "status" in fields else None)
    return out


def test_the_bulk_reading_is_logged_requests_on_these_lines():
    assert _bulk(_LINES) == _one_by_one(_LINES)
    assert _bulk(_LINES)[3] == {"status": "500", "batch_size": "8"}  # the key after a closing quote


_KEYS = st.sampled_from(
    [
        "status",
        "state",
        "batch",
        "bs",
        "prompt_tokens",
        "input_len",
        "model",
        "req_id",
        "latency_ms",
        "max_new_tokens",
        "x",
        "my_batch",
        "Status",
        "BATCH",
    ]
)
_VALUES = st.one_of(
    st.integers(0, 10**10).map(str),
    st.sampled_from(["ok", "200", "500", "done", " ok ", "-3", "1.5", "eight", "", "a b", 'x"y']),
)
_PAIRS = st.one_of(
    st.tuples(_KEYS, _VALUES).map(lambda kv: f"{kv[0]}={kv[1]}"),
    st.tuples(_KEYS, _VALUES).map(lambda kv: f'{kv[0]}="{kv[1]}"'),
    st.tuples(_KEYS, _VALUES).map(lambda kv: f'"{kv[0]}": "{kv[1]}"'),
    st.tuples(_KEYS, st.integers(-5, 10**10)).map(lambda kv: f'"{kv[0]}": {kv[1]}'),
    st.text(alphabet=st.characters(blacklist_characters="\n\r\x01"), max_size=6),
)
_SEPARATORS = st.sampled_from([" ", ", ", ",", "", "; ", "\t", "."])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_PAIRS, _SEPARATORS), max_size=8))
def test_the_bulk_reading_is_logged_requests_on_lines_built_from_their_syntax(parts):
    line = "".join(p + sep for p, sep in parts)
    assert _bulk([line]) == _one_by_one([line])


def _message() -> str:
    with gzip.open(H200 / "serve_leak" / "oom_messages.txt.gz", "rt") as handle:
        lines = handle.read().splitlines()
    return lines[lines.index("--- gpu-a-0-00047 2026-11-30T01:49:37.866Z") + 1]


def _scan(tmp_path, lines: list[str]) -> TextOom:
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    (found,) = scan_text_log(log)
    assert isinstance(found, TextOom)
    return found


TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/srv/app/server.py", line 214, in handle_generate',
    "    out = model.generate(**inputs)",
]


def test_the_scan_takes_the_request_line_above_the_traceback(tmp_path):
    request = "2026-11-30T01:49:37.866 ERROR gpu-a-0-00047 failed model=llama-mini-v2 batch=8 prompt_tokens=1024"
    found = _scan(tmp_path, ["2026-11-30T01:49:37.700 INFO started", request, *TRACEBACK, _message()])
    assert dict(found.request) == {"model_version": "llama-mini-v2", "batch_size": "8", "input_sequence_length": "1024"}


def test_a_succeeded_request_above_the_traceback_names_nothing(tmp_path):
    done = "2026-11-30T01:49:37.742 INFO gpu-a-0-00046 done status=200 model=llama-mini-v2 batch=4 prompt_tokens=512"
    assert _scan(tmp_path, [done, *TRACEBACK, _message()]).request == ()


def test_a_request_line_further_than_a_message_can_reach_is_not_taken(tmp_path):
    request = "ERROR gpu-a-0-00047 failed model=llama-mini-v2 batch=8 prompt_tokens=1024"
    filler = [f"  frame {i}" for i in range(REQUEST_REACH)]
    assert _scan(tmp_path, [request, *filler, _message()]).request == ()
