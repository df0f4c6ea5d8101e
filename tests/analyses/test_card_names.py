"""Cards are named by their telemetry first (nvidia-smi `name`, DCGM `modelName`), by the catalogue's totals only
where telemetry names none: an L40S reports the same total as the catalogue's L20, and telemetry that names it
an L40S wins. The names come from real telemetry (tests/cases/realworld/telemetry, the H200 capture's
nvidia-smi); the request lines beside them are derived for these tests, as each says."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from oomlab import api
from oomlab.analyses.fleet.card_names import card_label, device_names, total_label
from oomlab.analyses.fleet.sizing import sizing
from oomlab.cards import CARDS
from oomlab.config import IngestOptions
from oomlab.load.tables import connect

from conftest import CASES, H200

TELEMETRY = CASES / "realworld" / "telemetry"
L40S_CSV = TELEMETRY / "023_nvsmi_csv_l40s-full-query-timestamp" / "artifact.csv"
DCGM = {  # real DCGM exporter scrapes: the instance each names (its Hostname label) and its modelName
    "034_dcgm_prom_a100-mps-two-pods": "NVIDIA A100-SXM4-80GB",
    "038_dcgm_prom_v100-util-and-power-limit": "Tesla V100-SXM2-32GB",
    "059_dcgm_prom_t4-pod-labels-mid-scrape-fb-free-only": "Tesla T4",
}
L20 = next(c for c in CARDS if c.name == "L20")


def _total(name: str) -> int:
    return next(c.total_bytes for c in CARDS if c.label == name)


@pytest.mark.parametrize(
    "gpu_name, total, label",
    [
        ("NVIDIA L40S", L20.total_bytes, "L40S (44.40 GiB)"),  # the catalogue alone would say L20 48 GB
        ("NVIDIA H200", 150_109_880_320, "H200 141 GB"),
        ("NVIDIA A100-SXM4-80GB", _total("A100 80 GB"), "A100 80 GB"),
        ("Tesla V100-SXM2-32GB", _total("V100 32 GB"), "V100 32 GB"),
        ("Tesla T4", _total("T4 16 GB"), "T4 16 GB"),
        ("NVIDIA A10G", _total("A10 24 GB"), "A10G (21.96 GiB)"),  # an A10G is no A10, whatever its total
        ("NVIDIA H100 NVL", int(93.1 * 2**30), "H100 NVL (93.10 GiB)"),  # an H100 whose total is no H100 80 GB
    ],
)
def test_a_telemetry_name_wins_over_the_total(gpu_name: str, total: int, label: str):
    assert card_label(total, gpu_name) == label


def test_without_telemetry_the_catalogue_guesses_from_the_total():
    assert card_label(L20.total_bytes) == "L20 48 GB"
    assert card_label(L20.total_bytes, "  ") == "L20 48 GB"


def _requests(path: Path, instance: str, total: int) -> Path:
    """Derived: a few request lines for the instance the real telemetry names, with the total PyTorch reports
    for the catalogue card of that size (the L20's 44.40 GiB for a 48 GB Ada card such as the L40S)."""
    rows = [
        {
            "ts": f"2026-07-03T08:3{i}:00Z",
            "instance": instance,
            "gpu_index": 0,
            "request_id": f"r{i}",
            "status": "ok",
            "latency_ms": 100.0,
            "allocated_before": 20 << 30,
            "allocated_after": 20 << 30,
            "reserved_after": 22 << 30,
            "peak_allocated": 24 << 30,
            "device_total": total,
        }
        for i in range(4)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def l40s_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("l40s")
    db = folder / "l40s.duckdb"
    requests = _requests(folder / "requests.jsonl", "l40s-1", L20.total_bytes)
    report = api.ingest(db, [str(L40S_CSV)], IngestOptions(instance="l40s-1"))
    report2 = api.ingest(db, [str(requests)], IngestOptions())
    unnamed = _requests(folder / "other.jsonl", "l20-or-l40s", L20.total_bytes)
    report3 = api.ingest(db, [str(unnamed)], IngestOptions())
    assert [r.message for r in (*report.failed, *report2.failed, *report3.failed)] == []
    return db


def test_an_l40s_named_by_nvidia_smi_is_never_called_an_l20(l40s_db: Path):
    con = connect(l40s_db)
    try:
        assert device_names(con) == {("l40s-1", 0): "NVIDIA L40S"}
        cards = dict(zip(*sizing(con).select("instance", "card"), strict=True))
    finally:
        con.close()
    assert cards == {"l40s-1": "L40S (44.40 GiB)", "l20-or-l40s": "L20 48 GB"}


def test_a_card_size_is_named_by_telemetry_only_when_every_named_device_agrees(l40s_db: Path):
    con = connect(l40s_db)
    try:
        assert total_label(con, L20.total_bytes) == "L40S (44.40 GiB)"
        assert total_label(con, 150_109_880_320) == "H200 141 GB"  # no device of that size: the catalogue
    finally:
        con.close()


def test_dcgm_and_the_h200_nvidia_smi_name_their_devices(tmp_path: Path):
    db = tmp_path / "names.duckdb"
    paths = [TELEMETRY / case / "artifact.prom" for case in DCGM]
    report = api.ingest(db, [str(p) for p in paths], IngestOptions(at=datetime(2026, 11, 30)))
    h200 = api.ingest(db, [str(H200 / "env" / "nvidia-smi_run1.txt.gz")], IngestOptions(instance="gpu-a-0"))
    assert [r.message for r in (*report.failed, *h200.failed)] == []
    con = connect(db)
    try:
        names = device_names(con)
    finally:
        con.close()
    assert sorted(names.values()) == sorted([*DCGM.values(), "NVIDIA H200"])
    assert names[("gpu-a-0", 0)] == "NVIDIA H200"
