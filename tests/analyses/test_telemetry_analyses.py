"""Telemetry in use: neighbours nvidia-smi saw as evidence of external pressure, device water levels, and the
sample fleet's nvidia-smi samples joined to its request logs by instance."""

from __future__ import annotations

import gzip
import json
from datetime import datetime

import polars as pl
import pytest

from oomlab.analyses.fleet import classify, water_levels
from oomlab.load.tables import connect

from conftest import FLEET, H200

ENV = H200 / "env"
MIB = 1 << 20
GIB = 1 << 30
TRUTHS = json.loads((FLEET / "truths.json").read_text())
# serve_mixed's first OOM, in the pre-2.1 wording that names no other process (PyTorch 1.4-2.0): the numbers are
# the real message's (398.00 MiB requested, 139.80 GiB, 281.56 MiB free, 3.13 allocated + 405.08 MiB
# reserved-unallocated = 3.53 GiB reserved), at its real time.
OLD_FORMAT = (
    "2026-11-30T01:50:03.302Z ERROR RuntimeError: CUDA out of memory. Tried to allocate 398.00 MiB "
    "(GPU 0; 139.80 GiB total capacity; 3.13 GiB already allocated; 281.56 MiB free; 3.53 GiB reserved "
    "in total by PyTorch)\n"
)


def _ingest(run_cli, db, *paths, instance: str | None = None) -> None:
    extra = ("--instance", instance) if instance else ()
    result = run_cli("ingest", *paths, *extra, "--db", db)
    assert result.exit_code == 0, result.output


def _classified(db) -> pl.DataFrame:
    con = connect(db)
    try:
        return classify.classify_ooms(con)
    finally:
        con.close()


def test_a_neighbour_only_nvidia_smi_saw_is_external_pressure(tmp_path, db, run_cli) -> None:
    log = tmp_path / "gpu-b-1.log"
    log.write_text(OLD_FORMAT)
    _ingest(run_cli, db, log)
    (alone,) = _classified(db).iter_rows(named=True)
    # alone, the message names no process, but the card's accounting does not add up: 139.52 GiB in use, this
    # process's 3.53 GiB reserved and the largest context (1.5 GiB) account for 5.03 GiB; someone holds the rest
    # (at least 134.50 GiB: the neighbour's 135.29 GiB less what of the context this process did not use)
    assert (alone["cause"], alone["rule"], alone["neighbours_seen_by"]) == (
        "external_pressure",
        "dominant_neighbour",
        "memory accounting",
    )
    assert alone["other_pids"] == [] and alone["other_bytes"] > 130 * 1024 * MIB
    assert alone["evidence"].startswith(
        "processes the message does not name held about 134.50 GiB (the card had 139.53 GiB"
    )
    _ingest(run_cli, db, ENV / "nvsmi_apps_run2.csv.gz", instance="gpu-b-1")
    (seen,) = _classified(db).iter_rows(named=True)
    assert (seen["cause"], seen["rule"], seen["neighbours_seen_by"]) == (
        "external_pressure",
        "dominant_neighbour",
        "nvidia-smi",
    )
    assert seen["other_pids"] == [1030] and seen["other_bytes"] == 138540 * MIB
    # this process: pid 1009, the one nearest the message's 3.53 GiB reserved, listed with 4096 MiB
    assert seen["process_in_use_bytes"] == 4096 * MIB
    assert seen["evidence"] == (
        "process 1030 (/opt/torch/.venv/bin/python3) held 135.29 GiB (nvidia-smi at 2026-11-30 01:50:03) of the "
        "139.80 GiB device while this process had 4.00 GiB; 282 MiB was free for a 398 MiB request"
    )


def test_the_real_messages_already_name_the_neighbour_nvidia_smi_saw(db, run_cli, sql) -> None:
    _ingest(run_cli, db, H200 / "serve_mixed" / "requests.jsonl.gz")
    before = _classified(db)
    _ingest(run_cli, db, ENV / "nvsmi_apps_run2.csv.gz", ENV / "nvsmi_gpu_run2.csv.gz", instance="gpu-b-1")
    seen = sql("SELECT own_pid, other_pids, other_bytes, processes FROM fct_oom_neighbours_seen ORDER BY event_id")
    assert seen == [(1009, [1030], 138540 * MIB, 2)] * 4
    # `Process 1030 has 135.29 GiB memory in use` in every message: nvidia-smi agrees within its MiB rounding
    messages = sql("SELECT other_processes FROM oom_events")
    assert all(abs(m[0][0]["in_use_bytes"] - 138540 * MIB) < 5 * MIB for m in messages)
    after = _classified(db)
    assert after["neighbours_seen_by"].to_list() == ["message"] * 4
    assert after.drop("neighbours_seen_by").equals(before.drop("neighbours_seen_by"))


def test_device_levels_and_the_alert_see_the_neighbour(db, run_cli) -> None:
    _ingest(run_cli, db, H200 / "serve_mixed" / "requests.jsonl.gz")
    con = connect(db)
    try:
        without = water_levels.water_levels(con).row(0, named=True)
        assert without["level_source"] == "requests" and without["telemetry_max_level"] is None
        assert water_levels.alert_episodes(con).is_empty()  # reserved leaves 136 GiB of the card, on paper
    finally:
        con.close()
    _ingest(run_cli, db, ENV / "nvsmi_gpu_run2.csv.gz", instance="gpu-b-1")
    with gzip.open(ENV / "nvsmi_gpu_run2.csv.gz", "rt") as handle:
        samples = [line.split(", ") for line in list(handle)[1:]]
    used = [int(s[3].split()[0]) for s in samples]
    free = [int(s[5].split()[0]) for s in samples]
    con = connect(db)
    try:
        levels = water_levels.water_levels(con).row(0, named=True)
        episodes = water_levels.alert_episodes(con)
    finally:
        con.close()
    # the request-based columns do not change; the device's are what nvidia-smi saw of its 143771 MiB
    assert {k: levels[k] for k in without if not k.startswith(("telemetry_", "level_source", "alert_"))} == {
        k: without[k] for k in without if not k.startswith(("telemetry_", "level_source", "alert_"))
    }
    assert levels["level_source"] == "telemetry" and levels["telemetry_samples"] == len(samples)
    assert levels["telemetry_total_bytes"] == 143771 * MIB
    assert levels["telemetry_max_level"] == pytest.approx(max(used) / 143771)
    assert levels["telemetry_min_free_bytes"] == min(free) * MIB == 20 * MIB
    assert levels["telemetry_hours_above_95"] > 0 and levels["hours_above_95"] == 0
    # free memory measured on the card is below 1.2 x the largest request's need: the predictive alert fires
    (episode,) = episodes.iter_rows(named=True)
    assert episode["min_free_bytes"] == 20 * MIB < 1.2 * episode["largest_need_bytes"]
    assert episode["ooms"] == 4


def test_the_fleet_nvidia_smi_samples_join_the_request_logs(fleet_con) -> None:
    names = {i["name"] for i in TRUTHS["instances"]}
    telemetry = dict(fleet_con.execute("SELECT instance, count(*) FROM gpu_samples GROUP BY 1").fetchall())
    assert set(telemetry) == names  # `a10-01.gpu.csv.gz` is instance a10-01, as its request log says
    logged = {r[0] for r in fleet_con.execute("SELECT DISTINCT instance FROM requests").fetchall()}
    texts = {r[0] for r in fleet_con.execute("SELECT DISTINCT instance FROM oom_events").fetchall()}
    assert names <= logged | {"a10-06", "a100-06"} and "a10-06" in texts
    weeks = 3 * 7 * 24 * 12  # one sample every 5 minutes for three weeks
    assert set(telemetry.values()) == {weeks}
    cards = fleet_con.execute("SELECT DISTINCT gpu_name, memory_total_bytes FROM gpu_samples ORDER BY 2").fetchall()
    assert cards == [
        (c["smi_name"], c["smi_total_mib"] * MIB) for c in (TRUTHS["cards"]["A10"], TRUTHS["cards"]["A100"])
    ]


def test_the_fleet_backup_is_visible_on_its_hosts(fleet_con) -> None:
    backup = TRUTHS["backup"]
    rows = fleet_con.execute(
        "SELECT instance, count(DISTINCT pid), min(used_bytes), max(used_bytes), min(hour(ts)), max(hour(ts)) "
        "FROM gpu_process_samples WHERE process_name = ? GROUP BY 1 ORDER BY 1",
        [backup["process_name"]],
    ).fetchall()
    nights = 21  # a new pid every night
    mib = backup["gpu_memory_mib"] * MIB
    assert rows == [(host, nights, mib, mib, 1, 2) for host in sorted(backup["calendar_hosts"])]


def test_the_fleet_device_levels(fleet_con) -> None:
    levels = {r["instance"]: r for r in water_levels.water_levels(fleet_con).iter_rows(named=True)}
    a10 = TRUTHS["cards"]["A10"]
    # every a10-01 request leaves 4,024,434,688 bytes reserved; nvidia-smi adds the 738 MiB context (whole MiB)
    service_mib = (4_024_434_688 + TRUTHS["memory_model"]["non_pytorch"]) // MIB
    row = levels["a10-01"]
    assert row["level_source"] == "telemetry"
    assert row["telemetry_steady_level"] == pytest.approx(service_mib / a10["smi_total_mib"])
    assert row["telemetry_steady_level"] > row["steady_level"]  # the context counts on the card
    # with the backup's 10,342 MiB the card is at its fullest
    assert row["telemetry_max_level"] >= (service_mib + TRUTHS["backup"]["gpu_memory_mib"]) / a10["smi_total_mib"]
    assert levels["gpu-b-1"]["level_source"] == "requests"  # the H200 request logs have no telemetry here


def test_a_fleet_level_from_the_staging_view(fleet_con) -> None:
    at = datetime(2026, 11, 16, 0, 0, 0, 4000)  # the first a10-01 sample: 4576 MiB of 23028
    assert fleet_con.execute(
        "SELECT memory_used_bytes, memory_total_bytes, level FROM stg_gpu_samples WHERE instance = 'a10-01' AND ts = ?",
        [at],
    ).fetchall() == [(4576 * MIB, 23028 * MIB, 4576 / 23028)]
