"""Objects nested in a request row are read by their dotted names: a log shipper's envelope
(`{"kubernetes": {"node_name": ..., "pod_name": ...}}`, as Fluent Bit and Vector write it) names the node as the
device and the pod as one process lifetime, exactly as the flattened `kubernetes.node_name` would. The rows are
the real H200 serve_leak capture's (tests/data/h200/serve_leak/requests.jsonl), their `instance` moved into
such an envelope; both readers (DuckDB's typed one, and the line-by-line one a bad line sends a file to) agree."""

from __future__ import annotations

import json

import duckdb
import pytest

from oomlab import api
from oomlab.config import IngestOptions

from conftest import H200, read_jsonl_gz

ROWS = read_jsonl_gz(H200 / "serve_leak" / "requests.jsonl.gz")


def _enveloped(row: dict, index: int) -> dict:
    row = {k: v for k, v in row.items() if k != "instance"}
    pod = "svc-7c9f-a" if index < 20 else "svc-7c9f-b"  # a restart half-way: a new pod on the same node
    row["kubernetes"] = {"node_name": "gpu-node-7", "pod_name": pod, "labels": {"app": "svc", "tier": {"x": 1}}}
    return row


@pytest.mark.parametrize("bad_line", [False, True], ids=["typed reader", "line-by-line reader"])
def test_a_nested_envelope_names_the_node_and_the_pod(tmp_path, bad_line):
    lines = [json.dumps(_enveloped(row, i)) for i, row in enumerate(ROWS)]
    if bad_line:
        lines.append("{not json")
    log = tmp_path / "requests.jsonl"
    log.write_text("\n".join(lines) + "\n")
    db = tmp_path / "k8s.duckdb"
    report = api.ingest(db, [str(log)], IngestOptions())
    assert report.results[0].rows == len(ROWS) and report.results[0].rejects == (1 if bad_line else 0)
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT DISTINCT instance, pod FROM stg_requests ORDER BY pod").fetchall()
        extra = con.execute("SELECT extra FROM stg_requests LIMIT 1").fetchone()[0]
    finally:
        con.close()
    assert rows == [("gpu-node-7", "svc-7c9f-a"), ("gpu-node-7", "svc-7c9f-b")]
    # opened three levels deep; a fourth stays an object under its dotted name
    fields = json.loads(extra)
    assert fields["kubernetes.labels.app"] == "svc" and fields["kubernetes.labels.tier"] == {"x": 1}
    assert "kubernetes.node_name" not in fields  # consumed as the instance
