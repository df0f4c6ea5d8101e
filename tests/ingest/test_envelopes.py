"""Logs in log stores' and shippers' envelopes (parse/text/envelope.py, ingest/envelope.py).

The real artifacts of tests/cases/realworld/envelope/ (each copied from the URL its case.json names) state their
entries' time, host, pod, namespace, container and stream; corpus.check_case checks those. None of them holds a
CUDA OOM with its host, so the tests here wrap the real H200 OOM messages (tests/data/h200/serve_leak) in the real
artifacts' own records: the envelope is the artifact's, only its message and time are replaced, as the test says.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
from corpus import ROOT, cases

from oomlab import api
from oomlab.config import IngestOptions

from conftest import H200

ENVELOPES = ROOT / "envelope"
MIB = 2**20


def _real_ooms() -> list[str]:
    """The serve_leak capture's verbatim OOM messages (its README: real PyTorch 2.x messages on the H200)."""
    text = gzip.decompress((H200 / "serve_leak" / "oom_messages.txt.gz").read_bytes()).decode()
    return [line for line in text.splitlines() if line.startswith("CUDA out of memory")]


def _requested(message: str) -> int:
    return round(float(message.split("Tried to allocate ")[1].split(" MiB")[0]) * MIB)


def _artifact(prefix: str) -> Path:
    (folder,) = ENVELOPES.glob(f"{prefix}_*")
    (path,) = folder.glob("artifact.*")
    return path


def _ingest(tmp_path: Path, name: str, text: str) -> duckdb.DuckDBPyConnection:
    path = tmp_path / name
    path.write_text(text)
    api.ingest(tmp_path / "t.duckdb", [str(path)], IngestOptions())
    return duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True)


def test_every_envelope_kind_has_real_artifacts() -> None:
    kinds = Counter(c.spec["kind"] for c in cases() if c.name.startswith("envelope/"))
    wanted = (
        "journald",
        "loki",
        "elasticsearch",
        "cloudwatch",
        "gcl",
        "kubectl",
        "docker",
        "cri",
        "fluentbit",
        "vector",
    )
    assert all(kinds[k] >= 3 for k in wanted), kinds


def test_journald_oom_gets_the_records_time_and_host(tmp_path: Path) -> None:
    """earlyoom's real `journalctl -o json` record (case 003) carrying the H200's OOM messages: each event at its
    record's __REALTIME_TIMESTAMP, on its _HOSTNAME."""
    record = json.loads(_artifact("003").read_text().splitlines()[0])
    ooms = _real_ooms()[:3]
    start = 1_764_467_376_527_000  # microseconds: 2025-11-30 01:49:36.527 UTC
    lines = [
        json.dumps(record | {"MESSAGE": m, "__REALTIME_TIMESTAMP": str(start + i * 1_215_000)})
        for i, m in enumerate(ooms)
    ]
    con = _ingest(tmp_path, "journal.json", "\n".join(lines) + "\n")
    rows = con.execute("SELECT line, ts, instance, requested_bytes FROM oom_events ORDER BY line").fetchall()
    assert rows == [
        (i + 1, datetime(2025, 11, 30, 1, 49, 36, 527000) + timedelta(microseconds=i * 1_215_000), "PC", _requested(m))
        for i, m in enumerate(ooms)
    ]


def test_loki_answer_newest_first_is_put_back_in_order(tmp_path: Path) -> None:
    """A Loki query_range answer (the real answer of case 013, its stream's labels: node station.dev) whose values
    hold a traceback newest first, as Loki answers by default: one event, at the OOM line's time, on the node."""
    doc = json.loads(_loki_prefix(_artifact("013").read_text()))
    labels = doc["data"]["result"][0]["stream"]
    oom = _real_ooms()[0]
    lines = [
        "Traceback (most recent call last):",
        '  File "/app/serve.py", line 88, in generate',
        f"torch.OutOfMemoryError: {oom}",
    ]
    base = 1_764_467_376_527_000_000
    values = [[str(base + i * 1000), text] for i, text in enumerate(lines)][::-1]
    answer = {"status": "success", "data": {"resultType": "streams", "result": [{"stream": labels, "values": values}]}}
    con = _ingest(tmp_path, "loki.json", json.dumps(answer, indent=2))
    (row,) = con.execute("SELECT ts, instance, requested_bytes, line FROM oom_events").fetchall()
    assert row[:3] == (datetime(2025, 11, 30, 1, 49, 36, 527002), "station.dev", _requested(oom))
    text = (tmp_path / "loki.json").read_text().splitlines()
    assert oom in text[row[3] - 1]  # the event's line is the file's line holding the message


def _loki_prefix(text: str) -> str:
    """Case 013 is cut mid-answer: its first stream, closed (the labels are all the test takes from it)."""
    head = text[: text.index('"values"')].rstrip().rstrip(",")
    return head + "}]}}"


def test_cri_partial_lines_are_one_message(tmp_path: Path) -> None:
    """kubelet's CRI log (the shape of case 066: P lines continued by an F line) with the H200 OOM message split
    in three: one event with the whole message's numbers, at the first piece's line and time."""
    oom = _real_ooms()[1]
    cut = [oom[:60], oom[60:200], oom[200:]]
    cut[0] = f"torch.OutOfMemoryError: {cut[0]}"
    lines = [f"2025-11-30T01:49:37.74200000{i}Z stderr {'F' if i == 2 else 'P'} {piece}" for i, piece in enumerate(cut)]
    con = _ingest(tmp_path, "0.log", "2025-11-30T01:49:37.700000000Z stdout F serving\n" + "\n".join(lines) + "\n")
    rows = con.execute("SELECT line, ts, requested_bytes, total_capacity_bytes FROM oom_events").fetchall()
    assert rows == [(2, datetime(2025, 11, 30, 1, 49, 37, 742000), _requested(oom), round(139.80 * 2**30))]


def test_pods_without_a_node_stand_for_their_own_device_and_sources_says_so(tmp_path: Path) -> None:
    """`kubectl logs --prefix` (the shape of case 051) over two pods, one of them OOMing: the event is on its pod."""
    oom = _real_ooms()[2]
    text = (
        "[pod/vllm-7c9f-a/vllm] INFO 11-30 01:49:37 serving\n"
        f"[pod/vllm-7c9f-b/vllm] torch.OutOfMemoryError: {oom}\n"
        "[pod/vllm-7c9f-a/vllm] INFO 11-30 01:49:38 serving\n"
    )
    con = _ingest(tmp_path, "pods.log", text)
    assert con.execute("SELECT line, instance FROM oom_events").fetchall() == [(2, "vllm-7c9f-b")]
    (note,) = con.execute("SELECT note FROM sources").fetchone()
    assert "2 pods name no node and stand for their own device: vllm-7c9f-a, vllm-7c9f-b" in note


def test_a_broken_record_is_a_reject_and_the_rest_is_read(tmp_path: Path) -> None:
    """Docker's json-file (case 057's real lines, its corrupted line among them) with an OOM record appended."""
    oom = _real_ooms()[0]
    real = _artifact("057").read_text()
    record = json.dumps(
        {"log": f"torch.OutOfMemoryError: {oom}\n", "stream": "stderr", "time": "2025-11-30T01:49:36.527000000Z"}
    )
    con = _ingest(tmp_path, "container-json.log", real + record + "\n")
    count = len(real.splitlines())
    assert con.execute("SELECT line, ts FROM oom_events").fetchall() == [
        (count + 1, datetime(2025, 11, 30, 1, 49, 36, 527000))
    ]
    rejects = con.execute("SELECT line, reason FROM rejects").fetchall()
    assert len(rejects) == 1 and rejects[0][1].startswith("not an envelope record")


def test_docker_records_shipped_to_loki_as_they_are_are_unwrapped_too(tmp_path: Path) -> None:
    """Case 012's real answer: Promtail shipped Docker's json-file lines to Loki unparsed, so each Loki line is a
    Docker record. Its first value replaced by such a record holding the H200 OOM message: the event is read
    from the inner record, at Loki's time, on the stream's node (the poster's `[REDACTED]`)."""
    oom = _real_ooms()[0]
    text = _artifact("012").read_text().lstrip("`")
    doc = json.loads(text[: text.index('"values"')].rstrip().rstrip(",") + "}]}}")
    inner = json.dumps(
        {"log": f"torch.OutOfMemoryError: {oom}\n", "stream": "stderr", "time": "2022-06-20T10:48:50.6Z"}
    )
    doc["data"]["result"][0]["values"] = [["1655722130600667903", inner]]
    con = _ingest(tmp_path, "loki.json", json.dumps(doc))
    rows = con.execute("SELECT ts, instance, requested_bytes FROM oom_events").fetchall()
    assert rows == [(datetime(2022, 6, 20, 10, 48, 50, 600667), "[REDACTED]", _requested(oom))]


def test_a_cri_log_in_kubelets_pod_folder_is_that_pods(tmp_path: Path) -> None:
    """A CRI log (case 064's real line) under kubelet's /var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log,
    with an OOM line after it: the pod and container the path names; the node is --instance's."""
    oom = _real_ooms()[0]
    folder = tmp_path / "var/log/pods/llm_vllm-7c9f-b_0f1e2d3c-aaaa-bbbb-cccc-000000000000/vllm"
    folder.mkdir(parents=True)
    log = folder / "0.log"
    log.write_text(
        _artifact("064").read_text() + f"\n2025-11-30T01:49:36.527000000Z stderr F torch.OutOfMemoryError: {oom}\n"
    )
    api.ingest(tmp_path / "t.duckdb", [str(log)], IngestOptions())
    con = duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True)
    assert con.execute("SELECT line, ts, instance FROM oom_events").fetchall() == [
        (2, datetime(2025, 11, 30, 1, 49, 36, 527000), "vllm-7c9f-b")
    ]
    assert (
        "1 pod names no node and stands for its own device: vllm-7c9f-b"
        in con.execute("SELECT note FROM sources").fetchone()[0]
    )


def test_an_oom_beside_the_message_in_an_elasticsearch_hit(tmp_path: Path) -> None:
    """Elasticsearch's documented _search answer (case 021), its hit's _source given what a structured logger
    writes beside the message (ECS: error.stack_trace, host.name) and the H200 OOM as the traceback's last line, at
    a time of 2025: the event is read from the error, on the host, at the document's @timestamp."""
    oom = _real_ooms()[1]
    answer = json.loads(_artifact("021").read_text())
    source = answer["hits"]["hits"][0]["_source"]
    source |= {"@timestamp": "2025-11-30T01:49:37.742Z", "message": "request failed", "host": {"name": "gpu-node-3"}}
    source["error"] = {
        "stack_trace": f'Traceback (most recent call last):\n  File "serve.py", line 9\ntorch.OutOfMemoryError: {oom}'
    }
    con = _ingest(tmp_path, "hits.json", json.dumps(answer, indent=2))
    rows = con.execute("SELECT ts, instance, requested_bytes FROM oom_events").fetchall()
    assert rows == [(datetime(2025, 11, 30, 1, 49, 37, 742000), "gpu-node-3", _requested(oom))]


def test_a_log_too_large_to_hold_is_read_line_by_line(tmp_path: Path, monkeypatch) -> None:
    """The CRI log of the partial-line test and case 057's Docker lines, with the whole-read bound set below their
    size: the same events, at the same lines and times, read in the file's order (and `sources` says so); a JSON
    document over it is refused with one line naming the file."""
    from oomlab.parse import bounded

    monkeypatch.setattr(bounded, "WHOLE_DOCUMENT_BYTES", 200)
    (tmp_path / "cri").mkdir()
    (tmp_path / "docker").mkdir()
    test_cri_partial_lines_are_one_message(tmp_path / "cri")
    test_a_broken_record_is_a_reject_and_the_rest_is_read(tmp_path / "docker")
    con = duckdb.connect(str(tmp_path / "docker" / "t.duckdb"), read_only=True)
    assert "over 0 MiB: lines read in the file's order" in con.execute("SELECT note FROM sources").fetchone()[0]
    report = api.ingest(tmp_path / "doc.duckdb", [str(_artifact("030"))], IngestOptions())
    (failed,) = report.results
    assert failed.status == "failed" and "a JSON document over 0 MiB is not read whole" in failed.message


def test_a_year_guessed_for_a_pods_lines_is_said_in_sources(tmp_path: Path) -> None:
    """Case pasted_text/028's real vLLM 0.4.2 log (year-less `INFO 05-29 10:26:04` lines and the engine's version
    line), as `kubectl logs --prefix` prints it, with an OOM of the H200 capture after it: the pod's lines are read
    as a text log of their own, and the year its version line gives them is said in the file's note, once."""
    (case,) = (ROOT / "pasted_text").glob("028_*")
    vllm = [line for line in next(case.glob("artifact.*")).read_text().splitlines() if line.startswith("INFO 05-29")]
    lines = [*vllm, f"ERROR 05-29 10:27:00 worker.py:1] torch.OutOfMemoryError: {_real_ooms()[0]}"]
    con = _ingest(tmp_path, "pods.log", "".join(f"[pod/vllm-0/vllm] {line}\n" for line in lines))
    assert con.execute("SELECT ts FROM oom_events").fetchall() == [(datetime(2024, 5, 29, 10, 27),)]
    (note,) = con.execute("SELECT note FROM sources").fetchone()
    assert note.count("lines without a year read as 2024: the earliest not before vLLM 0.4.2") == 1
