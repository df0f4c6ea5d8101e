"""Randomised classic scenario fleets (`sample_logs/generate.py --scenario --classic`): physically consistent,
the same bytes for the same seed, and a truths.json that lists what was planted. The shapes a fleet may also
take are tested in test_scenario_shapes.py."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import sys
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "sample_logs"))

import generate
from fleetgen.oom_text import format_size
from fleetgen.scenario.truths import LEAK_GROWTH, MIN_OOMS

# Kolkata naive local times (ingest --tz), a leaking version, a scheduled job's neighbour, fragmentation,
# cache growth, a text-log host, a prompt threshold and a decoy; a third of the traffic keeps it fast.
SEED, TRAFFIC = 8, 0.3
SIZE = r"(\d+(?:\.\d+)? (?:bytes|KiB|MiB|GiB))"
MESSAGE = re.compile(
    rf"CUDA out of memory\. Tried to allocate {SIZE}\. GPU 0 has a total capacity of {SIZE} of which {SIZE} is "
    rf"free\. (?:Process (\d+) has {SIZE} memory in use\. )?Including non-PyTorch memory, this process has "
    rf"{SIZE} memory in use\. (?:Process (\d+) has {SIZE} memory in use\. )?Of the allocated memory {SIZE} is "
    rf"allocated by PyTorch, and {SIZE} is reserved by PyTorch but unallocated\. If reserved but unallocated"
)


def _generate(out: Path, seed: int = SEED) -> Path:
    argv = ["--scenario", "--classic", "--seed", str(seed), "--traffic", str(TRAFFIC), "--out", str(out)]
    assert generate.main(argv) == 0
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generate(tmp_path_factory.mktemp("scenario") / "fleet")


@pytest.fixture(scope="module")
def truths(fleet: Path) -> dict:
    return json.loads((fleet / "truths.json").read_text())


@pytest.fixture(scope="module")
def requests(fleet: Path) -> pl.DataFrame:
    frames = []
    for path in sorted((fleet / "requests").glob("*.jsonl.gz")):
        frames.append(pl.read_ndjson(io.BytesIO(gzip.decompress(path.read_bytes())), infer_schema_length=None))
    return pl.concat(frames, how="diagonal")


@pytest.fixture(scope="module")
def causes(fleet: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(gzip.decompress((fleet / "oom_causes.csv.gz").read_bytes()).decode())))


def test_the_scenario_has_what_the_test_relies_on(truths: dict) -> None:
    kinds = {c["kind"] for c in truths["causes"] if c["required"]}
    assert kinds >= {"leak", "scheduled_job", "external_pressure", "fragmentation", "capacity", "prompt_threshold"}
    assert truths["time"]["style"] == "naive_local" and truths["time"]["ingest_tz"] == "Asia/Kolkata"
    assert {i["log"] for i in truths["instances"]} == {"requests", "text"} and truths["decoys"]


def test_every_request_row_is_physically_consistent(requests: pl.DataFrame) -> None:
    col = pl.col
    checks = {
        "sizes are non-negative": pl.min_horizontal(
            "allocated_before", "allocated_after", "reserved_before", "reserved_after", "peak_allocated"
        )
        >= 0,
        "allocated <= reserved before": col("allocated_before") <= col("reserved_before"),
        "allocated <= reserved after": col("allocated_after") <= col("reserved_after"),
        "reserved <= card": pl.max_horizontal("reserved_before", "reserved_after") <= col("device_total"),
        "peak <= card": col("peak_allocated") <= col("device_total"),
    }
    for name, ok in checks.items():
        assert requests.filter(~ok).is_empty(), name
    ooms = requests.filter(col("status") == "oom")
    assert not ooms.is_empty()
    assert ooms.filter(
        (col("allocator_allocated") > col("reserved_memory"))
        | (col("reserved_memory") > col("device_total"))
        | (col("available_memory") < 0)
        | (col("available_memory") >= col("requested_size"))
    ).is_empty()


def test_every_oom_message_says_what_its_row_says(requests: pl.DataFrame, truths: dict, causes: list[dict]) -> None:
    non_pytorch = truths["memory"]["non_pytorch"]
    cause = {c["request_id"]: c["cause"] for c in causes}
    rows = requests.filter(pl.col("status") == "oom").iter_rows(named=True)
    for row in rows:
        m = MESSAGE.match(row["error"])
        assert m, row["error"]
        requested, total, free = row["requested_size"], row["device_total"], row["available_memory"]
        allocated, reserved = row["allocator_allocated"], row["reserved_memory"]
        assert m[1] == format_size(requested) and m[2] == format_size(total) and m[3] == format_size(free)
        assert m[6] == format_size(reserved + non_pytorch)
        assert m[9] == format_size(allocated) and m[10] == format_size(reserved - allocated)
        other = total - free - reserved - non_pytorch  # what the other process holds, to the byte
        named = m[5] or m[8]
        assert (other > 0) == (named is not None)
        if named:
            assert named == format_size(other)
        if cause[row["request_id"]] == "fragmentation":
            assert reserved - allocated >= requested > free
        else:
            assert reserved - allocated + free < requested


def test_text_logs_hold_their_hosts_ooms_in_pytorchs_words(fleet: Path, truths: dict) -> None:
    for host in (i for i in truths["instances"] if i["log"] == "text"):
        text = gzip.decompress((fleet / "textlogs" / f"{host['name']}.log.gz").read_bytes()).decode()
        found = [line for line in text.splitlines() if "torch.OutOfMemoryError: CUDA out of memory." in line]
        assert len(found) == host["ooms"]
        for line in found:
            m = MESSAGE.search(line)
            assert m and m[2] == format_size(host["device_total"])
            assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} ERROR torch", line)  # naive local time


def test_the_same_seed_gives_the_same_bytes(fleet: Path, tmp_path: Path) -> None:
    again = _generate(tmp_path / "again")
    files = sorted(p.relative_to(fleet) for p in fleet.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for name in files:
        assert (fleet / name).read_bytes() == (again / name).read_bytes(), name
    other = _generate(tmp_path / "other", SEED + 1)
    assert (other / "truths.json").read_bytes() != (fleet / "truths.json").read_bytes()


def _ooms_of(cause: dict, causes: list[dict], versions: dict[str, str], cards: dict[str, int]) -> int:
    """The OOMs oom_causes.csv.gz blames on one planted cause."""
    kind, match = cause["kind"], cause["match"]
    if kind in ("scheduled_job", "external_pressure", "leak", "fragmentation"):
        label = "external_pressure" if kind == "scheduled_job" else kind
        return sum(c["cause"] == label and c["subject"] == cause["subject"] for c in causes)
    rows = [c for c in causes if c["cause"] == "capacity" and cards[c["instance"]] == match["device_total"]]
    if kind == "capacity":
        return len(rows)
    return sum(c["source"] == "requests" and versions[c["request_id"]] == match["model_version"] for c in rows)


def test_truths_list_what_was_planted(truths: dict, causes: list[dict], requests: pl.DataFrame) -> None:
    versions = dict(zip(requests["request_id"], requests["model_version"], strict=True))
    cards = {i["name"]: i["device_total"] for i in truths["instances"]}
    for cause in truths["causes"]:
        assert cause["ooms"] == _ooms_of(cause, causes, versions, cards), cause["subject"]
        assert cause["ooms"] > 0 or cause["kind"] == "leak"  # a leak shows in allocated memory without OOMs
        enough = cause["ooms"] >= MIN_OOMS or cause.get("max_lifetime_growth_bytes", 0) >= LEAK_GROWTH
        assert cause["required"] == enough, cause["subject"]
    listed = {(c["kind"], c["subject"]) for c in truths["causes"]}
    for c in causes:  # every OOM's cause is listed
        kind = "capacity" if c["cause"] == "capacity" else c["cause"]
        subject = f"card {format_size(cards[c['instance']])}" if kind == "capacity" else c["subject"]
        assert (kind, subject) in listed
    assert Counter(c["cause"] for c in causes) == +Counter(truths["counts"]["by_cause"])


def test_the_leak_climbs_until_a_restart(truths: dict, requests: pl.DataFrame) -> None:
    leak = next(c for c in truths["causes"] if c["kind"] == "leak")
    version = leak["match"]["model_version"]
    mine = requests.filter(pl.col("model_version") == version).sort("instance", "ts")
    steps = mine.with_columns(step=pl.col("allocated_after").diff().over("instance"))
    drops = steps.filter(pl.col("step") < 0)  # only a restart frees what the leak kept
    ends = [lt for i in truths["instances"] for lt in i["lifetimes"] if lt["version"] == version]
    assert drops.height <= sum(lt["end_reason"] != "end" for lt in ends)
    assert steps["step"].max() == leak["bytes_per_request"]
    assert max(lt["leaked_bytes"] for lt in ends) == leak["max_lifetime_growth_bytes"] >= LEAK_GROWTH


def test_nothing_succeeds_above_the_card_and_a_full_leak_fails(truths: dict, requests: pl.DataFrame) -> None:
    memory = truths["memory"]
    ok = requests.filter(pl.col("status") == "ok")
    budget = memory["efficiency"] * (pl.col("device_total") - memory["non_pytorch"])
    assert ok.filter(pl.col("peak_allocated") > budget).is_empty()
    for host in truths["instances"]:  # a lifetime whose leak took it within 5 % of the budget ran out of memory
        room = memory["efficiency"] * (host["device_total"] - memory["non_pytorch"])
        for life in host["lifetimes"]:
            if host["baseline_allocated"][life["version"]] + life["leaked_bytes"] >= 0.95 * room:
                assert life["ooms"] > 0, (host["name"], life["start"])


def test_neighbours_and_decoys_are_in_the_calendar_and_only_neighbours_hold_memory(fleet: Path, truths: dict) -> None:
    recurring = json.loads((fleet / "calendar_recurring.json").read_text())
    occurrences = list(csv.DictReader(io.StringIO((fleet / "calendar_occurrences.csv").read_text())))
    named = {r["name"] for r in recurring} | {r["name"] for r in occurrences}
    jobs = [c for c in truths["causes"] if c["kind"] == "scheduled_job"]
    jobs += [n for n in truths["non_causes"] if n.get("job")]  # a neighbour that never caused an OOM
    assert named == {c.get("job") or c["match"]["job"] for c in jobs} | {d["name"] for d in truths["decoys"]}
    apps = "".join(
        gzip.decompress(p.read_bytes()).decode() for p in sorted((fleet / "nvidia-smi").glob("*.apps.csv.gz"))
    )
    for job in jobs:
        assert f", {job['process_name']}, {job['gpu_memory_bytes'] >> 20} MiB" in apps or not job["runs_started"]
    for decoy in truths["decoys"]:
        assert decoy["gpu_memory_bytes"] == 0 and decoy["name"] not in apps and decoy["requests_inside"] > 0


def test_the_fleet_ingests_with_its_time_zone(fleet: Path, truths: dict, run_cli, tmp_path: Path) -> None:
    db = tmp_path / "scenario.duckdb"
    paths = [fleet / p for p in ("requests", "textlogs", "nvidia-smi", "calendar_recurring.json")]
    result = run_cli(
        "ingest", *paths, fleet / "calendar_occurrences.csv", "--db", db, "--quiet", "--tz", "Asia/Kolkata"
    )
    assert result.exit_code == 0, result.output
    with duckdb.connect(str(db), read_only=True) as con:
        count, first = con.execute("SELECT count(*), min(ts) FROM requests").fetchone()
        events = con.execute("SELECT count(*) FROM oom_events").fetchone()[0]
    assert count == truths["counts"]["requests"]
    assert events == truths["counts"]["oom_events"]
    start = datetime.fromisoformat(truths["time"]["start"].replace("Z", "+00:00")).replace(tzinfo=None)
    assert timedelta(0) <= first - start < timedelta(minutes=30)  # local midnight, read as UTC
