"""The sample fleet (sample_logs/fleet): reproducible bytes, and every planted truth holds in its files."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
import sys
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from oomlab.cli.main import cli
from oomlab.parse.oom.message import parse_oom_message
from oomlab.parse.text.textlog import scan_text_log
from oomlab.records import TextOom

from conftest import H200, ROOT

FLEET = ROOT / "sample_logs" / "fleet"
SERVE_MIXED = H200 / "serve_mixed"
REAL_SMI = H200 / "env"
sys.path.insert(0, str(ROOT / "sample_logs"))

import generate  # noqa: E402
from fleetgen import grounding  # noqa: E402
from fleetgen.build import Options, build  # noqa: E402
from fleetgen.schedule import cron_starts  # noqa: E402

GIB, MIB, HOUR_MS, DAY_MS = 1 << 30, 1 << 20, 3_600_000, 86_400_000
OK_KEYS = [
    "ts",
    "instance",
    "gpu_index",
    "model_version",
    "request_id",
    "status",
    "latency_ms",
    "batch_size",
    "input_sequence_length",
    "output_sequence_length",
    "allocated_before",
    "allocated_after",
    "reserved_before",
    "reserved_after",
    "peak_allocated",
    "device_total",
]
OOM_KEYS = ["requested_size", "available_memory", "allocator_allocated", "reserved_memory", "error"]


def read_jsonl_gz(path: Path) -> pl.DataFrame:
    """One gzip'd JSON Lines file as a frame (OOM columns only where the file has OOM rows)."""
    return pl.read_ndjson(io.BytesIO(gzip.decompress(path.read_bytes())), infer_schema_length=None)


@pytest.fixture(scope="module")
def truths() -> dict:
    return json.loads((FLEET / "truths.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def requests() -> pl.DataFrame:
    """Every committed request row, with epoch-ms time, tokens and time of day added."""
    frames = [read_jsonl_gz(p) for p in sorted((FLEET / "requests").glob("*.jsonl.gz"))]
    frame = pl.concat(frames, how="diagonal_relaxed")
    return frame.with_columns(
        t=pl.col("ts").str.to_datetime("%Y-%m-%dT%H:%M:%S%.3fZ").dt.epoch("ms"),
        tokens=pl.col("batch_size") * (pl.col("input_sequence_length") + pl.col("output_sequence_length")),
    ).with_columns(tod=pl.col("t") % DAY_MS)


@pytest.fixture(scope="module")
def causes() -> pl.DataFrame:
    """oom_causes.csv.gz: the planted cause of every OOM."""
    return pl.read_csv(io.BytesIO(gzip.decompress((FLEET / "oom_causes.csv.gz").read_bytes())))


def in_backup(tod: pl.Expr) -> pl.Expr:
    """01:00 <= time of day < 02:30 UTC."""
    return (tod >= HOUR_MS) & (tod < 2.5 * HOUR_MS)


# --- the generator ------------------------------------------------------------------------------------


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_same_seed_gives_the_same_bytes(tmp_path: Path) -> None:
    first = build(Options(tmp_path / "a", seed=3, scale=0.02, weeks=1))
    build(Options(tmp_path / "b", seed=3, scale=0.02, weeks=1))
    build(Options(tmp_path / "c", seed=4, scale=0.02, weeks=1))
    same, other = _files(tmp_path / "a"), _files(tmp_path / "c")
    assert same == _files(tmp_path / "b")
    assert same["requests/a10-01.jsonl.gz"] != other["requests/a10-01.jsonl.gz"]
    assert first["counts"]["requests"] > 500


def test_the_committed_fleet_is_what_the_generator_writes(tmp_path: Path, truths: dict) -> None:
    gen = truths["generator"]
    build(Options(tmp_path, seed=gen["seed"], scale=gen["scale"], weeks=gen["weeks"]))
    committed, fresh = _files(FLEET), _files(tmp_path)
    assert sorted(committed) == sorted(fresh)
    changed = [name for name in committed if committed[name] != fresh[name]]
    assert changed == [], "regenerate with: python sample_logs/generate.py"


def test_the_committed_fleet_stays_small() -> None:
    assert sum(p.stat().st_size for p in FLEET.rglob("*") if p.is_file()) < 8_000_000


def test_requests_option_sets_the_size(tmp_path: Path) -> None:
    assert generate.main(["--out", str(tmp_path), "--requests", "3000", "--weeks", "1"]) == 0
    counts = json.loads((tmp_path / "truths.json").read_text())["counts"]
    assert 2700 < counts["requests"] + counts["requests_in_text_logs"] < 3300


def test_cron_expansion() -> None:
    start = 1_793_577_600_000  # 2026-11-02T00:00Z, a Monday
    minutes = [(t - start) // 60_000 for t in cron_starts("30 */6 * * *", start, start + DAY_MS)]
    assert minutes == [30, 390, 750, 1110]
    assert len(cron_starts("0 1 * * 1", start, start + 7 * DAY_MS)) == 1  # Mondays only


# --- grounding in the real H200 capture -------------------------------------------------------------------


def test_the_memory_model_constants_are_the_real_capture() -> None:
    rows = read_jsonl_gz(SERVE_MIXED / "requests.jsonl.gz").with_columns(
        tokens=pl.col("batch_size") * (pl.col("input_sequence_length") + pl.col("output_sequence_length"))
    )
    ok, oom = rows.filter(pl.col("status") == "ok"), rows.filter(pl.col("status") == "oom")
    slope = np.polyfit(ok["tokens"].to_numpy(), (ok["peak_allocated"] - ok["allocated_before"]).to_numpy(), 1)[0]
    assert abs(slope - grounding.H200_BYTES_PER_TOKEN) < 1
    assert set(rows["allocated_after"]) == {grounding.H200_BASELINE_ALLOCATED}
    assert set(rows["device_total"]) == {grounding.H200_DEVICE_TOTAL}
    assert ok["tokens"].max() == grounding.H200_LARGEST_OK_TOKENS
    assert oom["tokens"].min() == grounding.H200_SMALLEST_OOM_TOKENS
    largest = ok.filter(pl.col("tokens") == ok["tokens"].max())
    assert (largest["peak_allocated"] - largest["allocated_before"]).item() == grounding.H200_LARGEST_OK_PEAK_DELTA
    prefill = oom["batch_size"] * oom["input_sequence_length"]
    expected = ((prefill * grounding.H200_REQUESTED_PER_PREFILL_TOKEN + 2 * MIB - 1) // (2 * MIB)) * 2 * MIB
    assert (oom["requested_size"] == expected).all()
    assert sorted((oom["batch_size"] * oom["input_sequence_length"]).to_list())[0] == 53_888


def test_non_pytorch_memory_comes_from_the_real_messages() -> None:
    lines = gzip.decompress((SERVE_MIXED / "oom_messages.txt.gz").read_bytes()).decode().splitlines()
    gaps = []
    for line in (x for x in lines if x.startswith("CUDA")):
        msg = parse_oom_message(line)
        assert msg is not None and msg.other_processes[0][1] == pytest.approx(135.29 * GIB, abs=0.006 * GIB)
        gaps.append(msg.process_in_use_bytes - msg.allocated_by_pytorch_bytes - msg.reserved_unallocated_bytes)
    assert min(gaps) < grounding.H200_NON_PYTORCH < max(gaps)
    low, high, mid = grounding.h200_efficiency()
    assert low < mid < high


def test_the_a10_threshold_is_the_scaled_model(truths: dict) -> None:
    model = grounding.fleet_memory_model()
    summary = truths["memory_model"]
    assert summary["kv_factor"] == 8 and summary["activation_factor"] == 2
    assert truths["prompt_threshold"]["N"] == model.token_threshold(truths["cards"]["A10"]["device_total"])
    assert 30_000 < truths["prompt_threshold"]["N"] < 65_536 < truths["prompt_threshold"]["A100_N"]


# --- counts, messages and formats -------------------------------------------------------------------------


def test_counts_match_truths(truths: dict, requests: pl.DataFrame, causes: pl.DataFrame) -> None:
    counts = truths["counts"]
    assert requests.height == counts["requests"]
    assert (requests["status"] == "oom").sum() == counts["ooms_request_logs"]
    assert causes.height == counts["oom_events"]
    assert dict(causes.group_by("cause").len().iter_rows()) == counts["by_cause"]
    logged = causes.filter(pl.col("source") == "requests")["request_id"].sort().to_list()
    assert logged == requests.filter(pl.col("status") == "oom")["request_id"].sort().to_list()
    assert set(requests.columns) == {*OK_KEYS, *OOM_KEYS, "t", "tokens", "tod"}


def test_rows_have_the_canonical_keys_in_order() -> None:
    with gzip.open(FLEET / "requests" / "a10-01.jsonl.gz", "rt") as handle:
        first = json.loads(handle.readline())
    assert list(first) == OK_KEYS
    with gzip.open(FLEET / "requests" / "a10-01.jsonl.gz", "rt") as handle:
        failed = next(json.loads(line) for line in handle if '"status": "oom"' in line)
    assert list(failed) == OK_KEYS + OOM_KEYS
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["ts"])


def _unit(size: int) -> int:
    """The unit c10's format_size prints `size` in."""
    for unit, limit in ((1, 1024), (1024, MIB), (MIB, GIB)):
        if size <= limit:
            return unit
    return GIB


def _close(shown: int | None, actual: int) -> bool:
    """Whether a size read back from a message matches `actual` within the message's rounding (2 decimals)."""
    return shown is not None and abs(shown - actual) <= 0.005 * _unit(actual) + 1


def test_every_oom_message_parses_and_matches_its_row(requests: pl.DataFrame, truths: dict) -> None:
    non_pytorch = truths["memory_model"]["non_pytorch"]
    for row in requests.filter(pl.col("status") == "oom").iter_rows(named=True):
        msg = parse_oom_message(row["error"])
        assert msg is not None and msg.framework == "pytorch", row["request_id"]
        assert _close(msg.requested_bytes, row["requested_size"]), row["request_id"]
        assert _close(msg.free_bytes, row["available_memory"]), row["request_id"]
        assert _close(msg.allocated_by_pytorch_bytes, row["allocator_allocated"])
        assert _close(msg.reserved_unallocated_bytes, row["reserved_memory"] - row["allocator_allocated"])
        assert _close(msg.process_in_use_bytes, row["reserved_memory"] + non_pytorch)
        assert _close(msg.total_capacity_bytes, row["device_total"])
        others = sum(b for _, b in msg.other_processes)
        used = row["available_memory"] + row["reserved_memory"] + non_pytorch
        assert abs(used + others - row["device_total"]) <= 0.005 * GIB + 1  # T = free + this process + others
        assert row["available_memory"] < row["requested_size"]
        assert row["allocated_before"] <= row["allocator_allocated"] <= row["reserved_memory"]


def test_the_messages_copy_the_real_wording() -> None:
    real = gzip.decompress((SERVE_MIXED / "oom_messages.txt.gz").read_bytes()).decode().splitlines()[1]
    pattern = re.escape(real)
    for number in sorted(set(re.findall(r"\d+\.\d\d (?:MiB|GiB)|Process \d+ has", real)), key=len, reverse=True):
        pattern = pattern.replace(re.escape(number), r"(?:\d+\.\d\d (?:KiB|MiB|GiB)|Process \d+ has)")
    with_other = re.compile(pattern)
    first = read_jsonl_gz(FLEET / "requests" / "a10-01.jsonl.gz").filter(pl.col("status") == "oom")["error"]
    assert any(with_other.fullmatch(e) for e in first)
    assert all(e.startswith("CUDA out of memory. Tried to allocate ") and e.endswith(real[-120:]) for e in first)


def test_nvidia_smi_files_use_the_real_format(truths: dict) -> None:
    real_gpu = gzip.decompress((REAL_SMI / "nvsmi_gpu_run2.csv.gz").read_bytes()).decode().splitlines()[0]
    real_apps = gzip.decompress((REAL_SMI / "nvsmi_apps_run2.csv.gz").read_bytes()).decode().splitlines()[0]
    line = re.compile(
        r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}, 0, NVIDIA A10, \d+ MiB, 23028 MiB, \d+ MiB, "
        r"\d+ %, \d+ %, \d+, \d+\.\d\d W"
    )
    for inst in truths["instances"]:
        gpu = gzip.decompress((FLEET / "nvidia-smi" / f"{inst['name']}.gpu.csv.gz").read_bytes()).decode()
        apps = gzip.decompress((FLEET / "nvidia-smi" / f"{inst['name']}.apps.csv.gz").read_bytes()).decode()
        assert gpu.splitlines()[0] == real_gpu and apps.splitlines()[0] == real_apps
        if inst["card"] == "A10":
            assert all(line.fullmatch(x) for x in gpu.splitlines()[1:])


# --- planted truths ---------------------------------------------------------------------------------------


def test_the_backup_drives_ooms_on_its_affected_hosts(truths: dict, requests: pl.DataFrame) -> None:
    backup = truths["backup"]
    recurring = json.loads((FLEET / "calendar_recurring.json").read_text())
    job = next(j for j in recurring if j["name"] == backup["job"])
    assert (job["cron"], job["duration_minutes"], job["hosts"]) == ("0 1 * * *", 90, backup["calendar_hosts"])
    rates = requests.group_by("instance", in_backup(pl.col("tod")).alias("inside")).agg(
        ooms=(pl.col("status") == "oom").sum(), n=pl.len()
    )
    for host in backup["affected_hosts"]:
        if host not in set(requests["instance"]):
            continue  # a text-log host, checked below
        inside = rates.filter((pl.col("instance") == host) & pl.col("inside")).row(0, named=True)
        outside = rates.filter((pl.col("instance") == host) & ~pl.col("inside")).row(0, named=True)
        assert inside["ooms"] / inside["n"] > 5 * outside["ooms"] / outside["n"]
    for host in backup["unaffected_hosts"]:
        assert requests.filter((pl.col("instance") == host) & (pl.col("status") == "oom")).height == 0
    # every OOM while the backup runs names its process (capacity OOMs in the window too), no other does
    named = requests.filter(pl.col("error").str.contains("Process ", literal=True))
    during = requests.filter(
        (pl.col("status") == "oom") & in_backup(pl.col("tod")) & pl.col("instance").is_in(backup["calendar_hosts"])
    )
    assert named["request_id"].sort().to_list() == during["request_id"].sort().to_list()
    assert named.height >= backup["ooms"] - backup["ooms_by_host"].get("a10-06", 0)
    assert named["error"].str.contains(f"has {backup['gpu_memory_mib'] / 1024:.2f} GiB memory in use").all()


def test_the_backup_process_is_in_the_compute_apps_samples(truths: dict, requests: pl.DataFrame) -> None:
    backup = truths["backup"]
    row = requests.filter(pl.col("error").str.contains("Process ", literal=True)).row(0, named=True)
    pid = re.search(r"Process (\d+) has", row["error"]).group(1)  # type: ignore[union-attr]
    apps = gzip.decompress((FLEET / "nvidia-smi" / f"{row['instance']}.apps.csv.gz").read_bytes()).decode()
    samples = [r for r in csv.reader(io.StringIO(apps), skipinitialspace=True) if r[1] == pid]
    assert samples and {r[2] for r in samples} == {backup["process_name"]}
    assert {r[0][:10] for r in samples} == {row["ts"][:10].replace("-", "/")}  # a new pid every night
    for inst in truths["instances"]:
        apps = gzip.decompress((FLEET / "nvidia-smi" / f"{inst['name']}.apps.csv.gz").read_bytes()).decode()
        assert (backup["process_name"] in apps) == (inst["name"] in backup["calendar_hosts"])


def _lifetimes(frame: pl.DataFrame) -> list[pl.DataFrame]:
    """The rows of each process lifetime: a new one wherever allocated_before drops or the version changes."""
    changed = frame["model_version"].ne_missing(frame["model_version"].shift(1))
    drop = (frame["allocated_before"].diff().fill_null(0) < 0) | changed
    ids = drop.cum_sum()
    return [frame.filter(ids == i) for i in ids.unique(maintain_order=True)]


def test_the_leaking_version_climbs_until_the_watchdog_restarts_it(truths: dict, requests: pl.DataFrame) -> None:
    leak = truths["leak"]
    baseline = truths["memory_model"]["fleet_baseline_allocated"]
    others = requests.filter(pl.col("model_version") != leak["model_version"])["allocated_after"]
    assert sorted(others.unique()) == sorted({baseline, truths["fragmentation"]["allocated_baseline"]})
    for host, deployed in leak["deploys"].items():
        rows = requests.filter(pl.col("instance") == host).sort("t")
        if rows.is_empty():
            continue  # a text-log host
        mine = rows.filter(pl.col("model_version") == leak["model_version"])
        assert mine["ts"].min() >= deployed and mine["ts"].min()[:13] == deployed[:13]
        lives = [life for life in _lifetimes(mine) if life.height > 10]
        assert len(lives) == len(leak["watchdog_restarts"].get(host, [])) + 1
        for life in lives:
            hours = (life["t"][-1] - life["t"][0]) / HOUR_MS
            rise = life["allocated_after"][-1] - life["allocated_after"][0]
            assert life["allocated_after"].is_sorted() and rise > 0.5 * leak["bytes_per_hour"][host] * hours
    leaked = requests.filter(pl.col("allocated_before") > pl.col("allocated_before").min().over("instance"))
    assert set(leaked["model_version"]) == {leak["model_version"]}


def test_leak_ooms_happen_only_on_a_raised_baseline(truths: dict, requests: pl.DataFrame, causes: pl.DataFrame) -> None:
    ids = causes.filter(pl.col("cause") == "leak")["request_id"]
    rows = requests.filter(pl.col("request_id").is_in(ids.implode()))
    assert rows.height == truths["leak"]["ooms"]
    assert (rows["model_version"] == truths["leak"]["model_version"]).all()
    assert (rows["allocated_before"] > truths["memory_model"]["fleet_baseline_allocated"] + GIB).all()
    assert (rows["tokens"] <= truths["prompt_threshold"]["N"] * 1.01).all()


def test_the_prompt_threshold_on_the_small_card(truths: dict, requests: pl.DataFrame) -> None:
    n = truths["prompt_threshold"]["N"]
    healthy = requests.filter(
        pl.col("instance").str.starts_with("a10-")
        & (pl.col("allocated_before") == truths["memory_model"]["fleet_baseline_allocated"])
        & ~(in_backup(pl.col("tod")) & pl.col("instance").is_in(truths["backup"]["calendar_hosts"]))
    )
    above, below = healthy.filter(pl.col("tokens") > 1.01 * n), healthy.filter(pl.col("tokens") < 0.99 * n)
    assert above.height > 100 and (above["status"] == "oom").all()
    assert below.height > 10_000 and (below["status"] == "ok").all()
    big_a100 = requests.filter(pl.col("instance").str.starts_with("a100-") & (pl.col("tokens") > n))
    failed = big_a100.filter(pl.col("status") == "oom")["instance"]
    assert big_a100.height > 100 and failed.unique().to_list() == [truths["fragmentation"]["instance"]]


def test_fragmentation_ooms_have_room_in_reserved_memory(truths: dict, requests: pl.DataFrame) -> None:
    oom = requests.filter(pl.col("status") == "oom")
    roomy = oom.filter(pl.col("reserved_memory") - pl.col("allocator_allocated") >= pl.col("requested_size"))
    assert roomy["instance"].unique().to_list() == [truths["fragmentation"]["instance"]]
    assert roomy.height == truths["fragmentation"]["ooms"] > 50
    assert (roomy["reserved_memory"] - roomy["allocator_allocated"] >= 2 * roomy["requested_size"]).all()
    assert (roomy["available_memory"] < roomy["requested_size"]).all()


def test_cache_growth_is_reserved_only(truths: dict, requests: pl.DataFrame) -> None:
    rows = requests.filter(pl.col("instance") == truths["cache_growth"]["instance"]).sort("t")
    assert rows["allocated_after"].n_unique() == 1 and (rows["status"] == "ok").all()
    first = rows.filter(pl.col("model_version") == rows["model_version"][0])
    day2 = first.filter(pl.col("t") < first["t"][0] + 2 * DAY_MS)["reserved_after"].max()
    assert first["reserved_after"].is_sorted() and first["reserved_after"][-1] - day2 > 15 * GIB


def _epoch_ms(iso: pl.Series) -> list[int]:
    """`2026-11-07T13:00:00Z` strings as epoch milliseconds."""
    return iso.str.to_datetime("%Y-%m-%dT%H:%M:%SZ").dt.epoch("ms").to_list()


def test_decoys_hold_no_more_ooms_than_traffic_explains(truths: dict, requests: pl.DataFrame) -> None:
    occurrences = pl.read_csv(FLEET / "calendar_occurrences.csv")
    recurring = {j["name"]: j for j in json.loads((FLEET / "calendar_recurring.json").read_text())}
    start = _epoch_ms(pl.Series([truths["generator"]["start"]]))[0]
    end = start + truths["generator"]["weeks"] * 7 * DAY_MS
    outside = requests.filter(
        ~(in_backup(pl.col("tod")) & pl.col("instance").is_in(truths["backup"]["calendar_hosts"]))
    )
    for decoy in truths["decoys"]:
        if decoy["name"] in recurring:
            job = recurring[decoy["name"]]
            starts = cron_starts(job["cron"], start, end)
            windows = [(t, t + job["duration_minutes"] * 60_000) for t in starts]
        else:
            rows = occurrences.filter(pl.col("name") == decoy["name"])
            windows = list(zip(_epoch_ms(rows["start"]), _epoch_ms(rows["end"]), strict=True))
        hosts = outside.filter(pl.col("instance").is_in(decoy["hosts"]))
        bounds = np.array(windows).ravel()
        inside = np.searchsorted(bounds, hosts["t"].to_numpy(), side="right") % 2 == 1
        rate = (hosts["status"] == "oom").mean()
        expected = inside.sum() * rate
        observed = int((hosts.filter(pl.Series(inside))["status"] == "oom").sum())
        assert observed <= expected + 3 * math.sqrt(expected) + 3, decoy["name"]
    assert {d["name"] for d in truths["decoys"]} <= set(recurring) | set(occurrences["name"])


def test_text_logs_hold_their_instances_ooms(truths: dict) -> None:
    for inst in (i for i in truths["instances"] if i["log"] == "text"):
        found = list(scan_text_log(FLEET / "textlogs" / f"{inst['name']}.log.gz"))
        assert all(isinstance(f, TextOom) and f.ts is not None for f in found)
        assert len(found) == inst["ooms"]
        beside = [f for f in found if f.oom.other_processes]  # type: ignore[union-attr]
        assert len(beside) >= inst["ooms_by_cause"]["external_pressure"]  # capacity OOMs in the window too
        assert all(HOUR_MS <= (f.ts.hour * 60 + f.ts.minute) * 60_000 < 2.5 * HOUR_MS for f in beside)  # type: ignore[union-attr]


def test_ingest_finds_every_request_and_oom(tmp_path: Path, truths: dict) -> None:
    db = tmp_path / "fleet.duckdb"
    result = CliRunner().invoke(cli, ["ingest", str(FLEET), "--db", str(db), "--quiet"])
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM requests").fetchone()[0] == truths["counts"]["requests"]  # type: ignore[index]
        by_origin = dict(con.execute("SELECT origin, count(*) FROM oom_events GROUP BY 1").fetchall())
    finally:
        con.close()
    assert by_origin == {
        "structured": truths["counts"]["ooms_request_logs"],
        "message": truths["counts"]["ooms_text_logs"],
    }
