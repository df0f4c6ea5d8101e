"""Prometheus text: DCGM exporter fields into gpu_samples, vLLM metrics into engine_samples.

The scrapes here are written the way the exporters write them. DCGM: the `gpuMetricsFormat` template of
NVIDIA/dcgm-exporter `internal/pkg/rendermetrics/render_metrics.go` (labels gpu, UUID, pci_bus_id, device,
modelName, Hostname, then the Kubernetes ones), framebuffer fields in MiB per its `etc/default-counters.csv`;
the numbers are the real H200 run 2 sample at 01:49:53.035 (tests/data/h200/env/nvsmi_gpu_run2.csv: 141107 MiB
used, 2050 MiB free). The README's quick start shows the older `{gpu="0", UUID="..."}` spelling with a space and
the blank value 9223372036854775794. vLLM: the gauge names and labels (`engine`, `model_name`) of
vllm-project/vllm `vllm/v1/metrics/loggers.py`.
"""

from __future__ import annotations

import json
import os
from datetime import datetime

import duckdb

from oomlab.parse.detect import detect_kind
from oomlab.parse.telemetry.prom import parse_sample

MIB = 1 << 20
LABELS0 = (
    'gpu="0",UUID="GPU-5bd0a9c4-8e31-7c0f-4f7d-2b2a8e0c1f11",pci_bus_id="00000000:00:06.0",'
    'device="nvidia0",modelName="NVIDIA H200",Hostname="node-1",container="",namespace="",pod=""'
)
LABELS1 = LABELS0.replace('gpu="0"', 'gpu="1"').replace("1f11", "1f12").replace("nvidia0", "nvidia1")
DCGM = f"""# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{{{LABELS0}}} 2050 1796003393035
DCGM_FI_DEV_FB_FREE{{{LABELS1}}} 143156 1796003393035
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{{{LABELS0}}} 141107 1796003393035
DCGM_FI_DEV_FB_USED{{{LABELS1}}} 0 1796003393035
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{{LABELS0}}} 5 1796003393035
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{{{LABELS0}}} 135.68 1796003393035
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{{{LABELS0}}} 1980 1796003393035
DCGM_FI_DEV_FB_USED{{{LABELS0}}} 142161 1796003394036
DCGM_FI_DEV_FB_FREE{{{LABELS0}}} 996 1796003394036
"""
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
VLLM = f"""# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{{generation="0"}} 12345.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} 3.0 1796003393000
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="{MODEL}"}} 1.0 1796003393000
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="{MODEL}"}} 0.42 1796003393000
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{{engine="0",le="0.3",model_name="{MODEL}"}} 1.0 1796003393000
vllm:e2e_request_latency_seconds_count{{engine="0",model_name="{MODEL}"}} 7.0 1796003393000
vllm:kv_cache_usage_perc{{engine="0",model_name="{MODEL}"}} 0.57 1796003398000
"""


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_detected_by_content(tmp_path) -> None:
    assert detect_kind(_write(tmp_path, "scrape.txt", DCGM)) == "prometheus"
    assert detect_kind(_write(tmp_path, "metrics", VLLM)) == "prometheus"
    other = "# HELP node_load1 1m load average.\n# TYPE node_load1 gauge\nnode_load1 0.5\n"
    assert detect_kind(_write(tmp_path, "node.prom", other)) == "text"  # no DCGM or vLLM metric in it


def test_dcgm_fields_of_one_gpu_and_moment_make_one_row(tmp_path, db, run_cli, sql) -> None:
    result = run_cli("ingest", _write(tmp_path, "dcgm.prom", DCGM), "--db", db)
    assert result.exit_code == 0, result.output
    rows = sql(
        "SELECT ts, instance, gpu_index, gpu_name, gpu_uuid, gpu_bus_id, memory_used_bytes, "
        "memory_free_bytes, memory_total_bytes, utilization_gpu, power_w, origin, line "
        "FROM gpu_samples ORDER BY ts, gpu_index"
    )
    at, later = datetime(2026, 11, 30, 1, 49, 53, 35000), datetime(2026, 11, 30, 1, 49, 54, 36000)
    uuid = "GPU-5bd0a9c4-8e31-7c0f-4f7d-2b2a8e0c1f11"
    assert rows == [
        (
            at,
            "node-1",
            0,
            "NVIDIA H200",
            uuid,
            "00000000:00:06.0",
            141107 * MIB,
            2050 * MIB,
            None,
            5.0,
            135.68,
            "dcgm",
            3,
        ),
        (
            at,
            "node-1",
            1,
            "NVIDIA H200",
            uuid[:-1] + "2",
            "00000000:00:06.0",
            0,
            143156 * MIB,
            None,
            None,
            None,
            "dcgm",
            4,
        ),
        (
            later,
            "node-1",
            0,
            "NVIDIA H200",
            uuid,
            "00000000:00:06.0",
            142161 * MIB,
            996 * MIB,
            None,
            None,
            None,
            "dcgm",
            18,
        ),
    ]
    # DCGM states used and free, not the total: the staging view adds them (the driver's reserve is not in it)
    assert sql("SELECT memory_total_bytes, level FROM stg_gpu_samples WHERE line = 3") == [
        (143157 * MIB, 141107 / 143157)
    ]
    assert sql("SELECT rows, rejects FROM sources") == [(3, 0)]  # SM_CLOCK is not a field oomlab keeps


def test_instance_option_wins_over_the_hostname_label(tmp_path, db, run_cli, sql) -> None:
    assert run_cli("ingest", _write(tmp_path, "dcgm.prom", DCGM), "--instance", "gpu-b-1", "--db", db).exit_code == 0
    assert sql("SELECT DISTINCT instance FROM gpu_samples") == [("gpu-b-1",)]


def test_bad_samples_are_rejected(tmp_path, db, run_cli, sql) -> None:
    text = (
        DCGM
        + "\n".join(
            [
                # 22
                'DCGM_FI_DEV_GPU_TEMP{gpu="0", UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"} 9223372036854775794',
                'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-x" 12 1796003395000',  # 23
                'DCGM_FI_DEV_FB_USED{UUID="GPU-x"} 12 1796003395000',  # 22
                'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-x"} twelve 1796003395000',  # 23
                'DCGM_FI_DEV_FB_USED{gpu="0", UUID="GPU-x",} 12 1796003395000',  # 24: fine
            ]
        )
        + "\n"
    )
    path = _write(tmp_path, "node-2.prom", text)
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0
    assert dict(sql("SELECT line, reason FROM rejects ORDER BY line")) == {
        20: "DCGM_FI_DEV_GPU_TEMP: DCGM blank value (the field had no reading)",
        21: "not a Prometheus sample: expected `name{labels} value [timestamp]`",
        22: "DCGM_FI_DEV_FB_USED: no gpu index label",
        23: "DCGM_FI_DEV_FB_USED: 'twelve' is not a number",
    }
    assert f"{path}:20: DCGM_FI_DEV_GPU_TEMP: DCGM blank value (the field had no reading)" in result.stderr
    # no Hostname label: the file name
    assert sql("SELECT instance, memory_used_bytes FROM gpu_samples WHERE line = 24") == [("node-2", 12 * MIB)]


def test_a_scrape_without_timestamps_has_no_time_unless_given_one(tmp_path, db, run_cli, sql) -> None:
    untimed = (
        "\n".join(line.rsplit(" ", 1)[0] if line.startswith("DCGM") else line for line in DCGM.splitlines()[:9]) + "\n"
    )
    path = _write(tmp_path, "once.prom", untimed + "DCGM_FI_DEV_FB_USED{" + LABELS0 + "} 7\n")
    os.utime(path, (1796003400, 1796003400))  # the file's modification time is not the scrape's
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT DISTINCT ts FROM gpu_samples") == [(None,)]
    assert sql("SELECT line, reason FROM rejects") == [
        (
            10,
            "DCGM_FI_DEV_FB_USED: series repeated without a timestamp (several scrapes in one file need sample "
            "timestamps)",
        )
    ]
    moment, placed = datetime(2026, 11, 30, 1, 50, 0), tmp_path / "placed.duckdb"
    assert run_cli("ingest", path, "--at", moment.isoformat(), "--db", placed).exit_code == 0
    with duckdb.connect(str(placed), read_only=True) as con:
        assert con.execute("SELECT DISTINCT ts FROM gpu_samples").fetchall() == [(moment,)]


def test_vllm_metrics(tmp_path, db, run_cli, sql) -> None:
    assert run_cli("ingest", _write(tmp_path, "vllm-0.prom", VLLM), "--db", db).exit_code == 0
    rows = sql("SELECT line, ts, instance, framework, model_name, metric, value FROM engine_samples ORDER BY line")
    at = datetime(2026, 11, 30, 1, 49, 53)
    assert rows == [
        (6, at, "vllm-0", "vllm", MODEL, "vllm:num_requests_running", 3.0),
        (9, at, "vllm-0", "vllm", MODEL, "vllm:num_requests_waiting", 1.0),
        (12, at, "vllm-0", "vllm", MODEL, "vllm:kv_cache_usage_perc", 0.42),
        (16, at, "vllm-0", "vllm", MODEL, "vllm:e2e_request_latency_seconds_count", 7.0),
        (17, datetime(2026, 11, 30, 1, 49, 58), "vllm-0", "vllm", MODEL, "vllm:kv_cache_usage_perc", 0.57),
    ]
    labels = sql("SELECT labels FROM engine_samples WHERE line = 12")[0][0]
    assert json.loads(labels) == {"engine": "0", "model_name": MODEL}
    assert sql("SELECT rows, rejects, kind FROM sources") == [(5, 0, "prometheus")]


def test_label_values_keep_their_escapes_decoded() -> None:
    sample = parse_sample(1, r'vllm:num_requests_running{model_name="a \"quoted\" \\ name",engine="0"} 2')
    assert sample.labels == {"model_name": 'a "quoted" \\ name', "engine": "0"}  # type: ignore[union-attr]
    assert sample.value == 2.0 and sample.ts is None  # type: ignore[union-attr]
