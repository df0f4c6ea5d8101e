"""Telemetry files into their tables: which instance they are of, when their samples were taken, DCGM's MIG
instances, pods and hosts, the serving engines' metrics, and a database an earlier version wrote.

The files are real ones of the corpus (tests/cases/realworld/telemetry, each from the page its case.json
names) and of tests/data/h200/env:
- 001 https://github.com/utkuozdemir/nvidia_gpu_exporter/blob/e656cd81a180e7e0e7862b53c9acd4c2fb0f590b/internal/captures/linux-x86_64__nvidia-h100-mig__590.48.01.txt
- 022 https://github.com/netdata/netdata/blob/59522eb7b30226beddac1d7dad6598a330dc3b8a/src/go/plugin/go.d/modules/nvidia_smi/testdata/tesla-p100.csv
- 026 https://github.com/NVIDIA/dcgm-exporter/issues/94
- 034 https://github.com/NVIDIA/dcgm-exporter/pull/432
- 036 https://github.com/NVIDIA/dcgm-exporter/issues/317
- 037 https://github.com/NVIDIA/dcgm-exporter/pull/736
- 039 https://github.com/NVIDIA/gpu-monitoring-tools/blob/021662a21098fc7f85a5a56f620df0fea1ffcb32/exporters/prometheus-dcgm/k8s/pod-gpu-metrics-exporter/README.md
- 045 https://github.com/IBM/vllm/pull/18
- 046 https://github.com/sgl-project/sglang/pull/1853
- 048 https://github.com/smg-project/smg/pull/813
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import duckdb

from oomlab.load.tables import connect

from conftest import H200, ROOT

CORPUS = ROOT / "tests" / "cases" / "realworld" / "telemetry"
MIB = 1 << 20
P100 = "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6"  # the netdata fixture's card


def _artifact(case: str) -> Path:
    (path,) = CORPUS.glob(f"{case}_*/artifact.*")
    return path


def _copy(case: str, to: Path) -> Path:
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(_artifact(case), to)
    return to


def test_a_table_lands_with_its_time_and_the_card_once_in_the_staging_view(db, run_cli, sql) -> None:
    assert run_cli("ingest", _artifact("001"), "--db", db).exit_code == 0
    assert sql("SELECT count(*), count(mig_instance_id), min(ts), max(ts) FROM gpu_samples") == [
        (5, 4, datetime(2026, 7, 14, 9, 0, 43), datetime(2026, 7, 14, 9, 0, 43))
    ]
    # the MIG devices are parts of the card nvidia-smi also prints: device-level views see the card once
    assert sql("SELECT gpu_index, memory_used_bytes, level FROM stg_gpu_samples") == [(0, 11125 * MIB, 11125 / 81559)]
    assert sql("SELECT pid, gpu_index FROM stg_gpu_process_samples ORDER BY pid") == [
        (21180, 0),
        (21181, 0),
        (21198, 0),
    ]
    assert sql("SELECT kind, rows FROM sources") == [("nvsmi_table", 8)]


def test_a_mangled_index_is_a_reject_and_the_rest_loads(tmp_path, db, run_cli, sql) -> None:
    lines = _artifact("001").read_text().splitlines()
    lines[20] = lines[20].replace("|  0    2   0   0  |", "|  0 99999999999 0 0  |")  # MIG device GI 2
    path = tmp_path / "h100.txt"
    path.write_text("\n".join(lines) + "\n")
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0
    assert f"{path}:21: mig_instance_id 99999999999 is out of range" in " ".join(result.stderr.split())
    assert sql("SELECT count(*) FROM gpu_samples") == [(4,)]
    assert sql("SELECT count(*) FROM gpu_process_samples") == [(3,)]


def test_a_compute_apps_file_takes_the_instance_that_holds_its_gpu(tmp_path, db, run_cli, sql) -> None:
    gpu = _copy("022", tmp_path / "tesla-p100.csv")  # `name, uuid, ...`: GPU-ef1b2c9b-...
    apps = tmp_path / "captures" / "compute-apps.csv"  # a process on that card, named after the tool: `captures`
    apps.parent.mkdir()
    apps.write_text(f"gpu_uuid, process_name\n{P100}, vgpu\n")
    for order, instance in (((gpu, apps), "tesla-p100"), ((apps, gpu), "captures")):
        placed = tmp_path / f"{order[0].stem}.duckdb"
        assert run_cli("ingest", *order, "--db", placed).exit_code == 0
        with duckdb.connect(str(placed), read_only=True) as con:
            seen = con.execute(
                "SELECT instance FROM gpu_samples UNION ALL SELECT instance FROM gpu_process_samples"
            ).fetchall()
        # in either order: the first file's instance is the one its name gives, the second finds the GPU in it
        assert set(seen) == {(instance,)}, order


def test_files_named_after_the_tool_take_their_folder(db, run_cli, sql) -> None:
    env = H200 / "env"
    assert run_cli("ingest", env / "nvsmi_gpu_run2.csv.gz", env / "nvsmi_apps_run2.csv.gz", "--db", db).exit_code == 0
    assert sql("SELECT DISTINCT instance FROM gpu_samples UNION SELECT DISTINCT instance FROM gpu_process_samples") == [
        ("env",)
    ]
    # one instance: the processes are placed on its one GPU
    assert sql("SELECT DISTINCT gpu_index FROM stg_gpu_process_samples") == [(0,)]


def test_dcgm_mig_instances_stay_apart(db, run_cli, sql) -> None:
    assert run_cli("ingest", _artifact("036"), "--db", db).exit_code == 0
    assert sql("SELECT gpu_index, mig_instance_id, mig_profile, memory_used_bytes FROM gpu_samples ORDER BY line") == [
        (0, 3, "1g.6gb", 3 * MIB),
        (0, 4, "1g.6gb", 3 * MIB),
        (0, 5, "1g.6gb", 3 * MIB),
        (0, 6, "1g.6gb", 3 * MIB),
        (1, 3, "1g.6gb", 3 * MIB),
        (1, 4, "1g.6gb", 3 * MIB),
    ]
    # a scrape saved without timestamps: no time of its own, so the staging view leaves it out
    assert sql("SELECT count(*) FROM gpu_samples WHERE ts IS NULL") == [(6,)]
    assert sql("SELECT DISTINCT instance, hostname FROM gpu_samples") == [
        ("yg-data-k8s-gpu-a30-node-test-test0003.mt", "yg-data-k8s-gpu-a30-node-test-test0003.mt")
    ]


def test_two_pods_on_one_card_and_a_lowercase_hostname(tmp_path, db, run_cli, sql) -> None:
    assert run_cli("ingest", _artifact("034"), "--db", db).exit_code == 0
    assert sql("SELECT pod, namespace, container, memory_used_bytes FROM gpu_samples ORDER BY line") == [
        ("gpu-burn-deployment-1-85dc8ff699-clvh5", "default", "gpu-burn-container-1", 15866 * MIB),
        ("vllm-medgemma-4b-it-d599b4c99-f95nk", "vllm-inference", "vllm", 15866 * MIB),
    ]
    lower = tmp_path / "lower.duckdb"
    assert run_cli("ingest", _artifact("037"), "--instance", "triton-node", "--db", lower).exit_code == 0
    with duckdb.connect(str(lower), read_only=True) as con:
        # --instance names the instance; the label still says which host the exporter ran on
        assert con.execute("SELECT DISTINCT instance, hostname FROM gpu_samples").fetchall() == [
            ("triton-node", "dcgm-exporter-wwwjh")
        ]


def test_the_1x_exporters_names_and_labels(db, run_cli, sql) -> None:
    assert run_cli("ingest", _artifact("039"), "--db", db).exit_code == 0
    assert sql(
        "SELECT gpu_index, gpu_uuid, pod, namespace, container, temperature, utilization_gpu FROM gpu_samples"
    ) == [
        (0, "GPU-2b399198-c670-a848-173b-d3400051a200", "pod1", "default", "pod1-ctr", 33.0, 0.0),
        (1, "GPU-9567a9e7-341e-bb7e-fcf5-788d8caa50f9", "pod1", "default", "pod1-ctr", 34.0, 0.0),
    ]


def test_sglang_and_tgi_metrics(tmp_path, db, run_cli, sql) -> None:
    paths = [_copy(case, tmp_path / f"{case}.prom") for case in ("045", "046", "048")]
    assert run_cli("ingest", *paths, "--db", db).exit_code == 0
    rows = sql(
        "SELECT instance, framework, model_name, metric, value, labels FROM engine_samples ORDER BY instance, line"
    )
    assert [r[:5] for r in rows if r[0] == "045"] == [
        ("045", "tgi", None, "tgi_queue_size", 0.0),  # the histogram's buckets are not samples
        ("045", "tgi", None, "tgi_batch_current_size", 0.0),
    ]
    model = "/shared/public/elr-models/meta-llama/Llama-3.2-3B/5cc0ffe09ee49f7be6ca7c794ee6bd7245e84e60/"
    assert {(r[1], r[2]) for r in rows if r[0] == "046"} == {("sglang", model)}  # the early `name` label
    grpc = [r for r in rows if r[0] == "048"]
    assert [(r[1], r[3], r[4]) for r in grpc][:2] == [
        ("sglang", "sglang_cuda_graph_passes_total", 311.0),
        ("sglang", "sglang_num_prefill_prealloc_queue_reqs", 0.0),
    ]
    assert json.loads(grpc[0][5])["worker_addr"] == "grpc://127.0.0.1:8001"
    assert sql("SELECT count(*) FROM engine_samples WHERE ts IS NOT NULL") == [(0,)]


def test_a_database_an_earlier_version_wrote_gets_the_new_columns(db, run_cli, sql) -> None:
    connect(db).close()
    with duckdb.connect(str(db)) as con:  # gpu_samples as the earlier version created it
        for column in ("mig_instance_id", "mig_profile", "hostname", "pod", "namespace", "container"):
            con.execute(f"ALTER TABLE gpu_samples DROP COLUMN {column}")  # names from this test's list
        con.execute("ALTER TABLE gpu_process_samples DROP COLUMN gpu_index")
        con.execute("ALTER TABLE gpu_process_samples DROP COLUMN mig_instance_id")
        con.execute("ALTER TABLE gpu_samples ALTER COLUMN ts SET NOT NULL")
        con.execute("COMMENT ON TABLE sources IS 'oomlab schema 0123456789abcdef'")
    assert run_cli("ingest", _artifact("001"), _artifact("036"), "--db", db).exit_code == 0
    assert sql("SELECT count(*), count(mig_instance_id), count(*) - count(ts) FROM gpu_samples") == [(11, 10, 6)]
    assert sql("SELECT count(gpu_index) FROM gpu_process_samples") == [(3,)]


def test_a_headerless_csv_is_read_with_columns_and_refused_without(run_cli, sql, db) -> None:
    """Verbatim from https://github.com/enkore/i3pystatus/pull/776 (`--format=csv,noheader,nounits`): seven bare
    numbers say nothing of which is which; the query's field list, given as --columns, does."""
    from corpus import ROOT

    artifact = next((ROOT / "telemetry").glob("019_*")) / "artifact.csv"
    refused = run_cli("ingest", artifact, "--db", db, "--quiet")
    assert refused.exit_code == 0 and "--columns" in refused.output  # refused, and kept as the file's reject
    assert sql("SELECT rows, rejects FROM sources") == [(0, 1)]
    fields = "memory.total,memory.free,memory.used,temperature.gpu,fan.speed,utilization.gpu,utilization.memory"
    result = run_cli("ingest", artifact, "--db", db, "--columns", fields, "--quiet")
    assert result.exit_code == 0, result.output
    assert sql("SELECT memory_total_bytes, memory_used_bytes, temperature, utilization_gpu FROM gpu_samples") == [
        (2004 << 20, 0, 44.0, 0.0)
    ]
    assert sql("SELECT rows, rejects FROM sources") == [(1, 0)]  # read again with the names: its rows replace it


def test_a_scrape_that_names_its_hosts_is_on_them_not_on_its_name(db, run_cli, sql) -> None:
    """034's DCGM scrape names its node (`Hostname`): `oomlab sources` places the file by its rows, not by its
    file's name (the name of a file that names its device is no device)."""
    assert run_cli("ingest", _artifact("034"), "--db", db).exit_code == 0
    hosts = sql("SELECT DISTINCT instance FROM gpu_samples")
    assert hosts and all(host != "artifact" for (host,) in hosts)
    assert sql("SELECT placed_by, device FROM rpt_sources") == [("its rows", None)]
