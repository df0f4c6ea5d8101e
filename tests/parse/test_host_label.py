"""A text log that names its node in its head is placed there, not under its file's name (a pod's log)."""

from __future__ import annotations

import gzip

from oomlab.parse.text.host_label import host_named_in

# The first line a serving pod writes, as a log shipper keeps it; the second a logfmt line of another service.
POD_HEAD = (
    "2026-03-13T04:45:18.065 INFO [server] pod=summarize-server-rwd28j6b4g-bp6gp node=node-c-2 pid=1 serving "
    "model=summarize-355m-int8-v2.5 on cuda:0\n"
)


def test_a_pods_log_names_its_node(tmp_path):
    log = tmp_path / "summarize-server-rwd28j6b4g-bp6gp.log.gz"
    with gzip.open(log, "wt") as handle:
        handle.write(POD_HEAD + "2026-03-13T04:45:37.661 ERROR Traceback (most recent call last):\n")
    assert host_named_in(log) == "node-c-2"


def test_json_lines_name_it_too(tmp_path):
    log = tmp_path / "app.log"
    log.write_text('{"kubernetes.node_name": "gpu-a10-03", "msg": "ready"}\n{"hostname": "gpu-a10-03"}\n')
    assert host_named_in(log) == "gpu-a10-03"


def test_a_server_the_service_connects_to_is_no_host(tmp_path):
    log = tmp_path / "app.log"
    log.write_text("INFO connecting to redis host=10.0.0.5 port=6379\n")
    assert host_named_in(log) is None


def test_two_nodes_named_place_nothing(tmp_path):
    log = tmp_path / "merged.log"
    log.write_text("node=gpu-a10-01 ready\nnode=gpu-a10-02 ready\n")
    assert host_named_in(log) is None


def test_the_pods_ooms_land_on_its_node(tmp_path, run_cli, sql):
    """End to end: the pod's log (a real H200 message after the head above) is on node-c-2."""
    from conftest import H200

    with gzip.open(H200 / "serve_mixed/oom_messages.txt.gz", "rt") as handle:
        messages = handle.read()
    log = tmp_path / "summarize-server-rwd28j6b4g-bp6gp.log"
    log.write_text(POD_HEAD + messages)
    result = run_cli("ingest", str(log), "--db", str(tmp_path / "db.duckdb"), "--quiet")
    assert result.exit_code == 0, result.output
    import duckdb

    con = duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT DISTINCT instance FROM stg_oom_events").fetchall() == [("node-c-2",)]
    finally:
        con.close()
