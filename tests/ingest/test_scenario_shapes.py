"""The shapes a scenario fleet may take besides the classic ones (`sample_logs/generate.py --scenario --shapes
...`, fleetgen/scenario/shapes.py): written as real fleets write them, and recorded in truths.json so that
bench/truth.py can score them.

Three fleets with every shape, at a third of the traffic: seed 3 (pods and nodes as `pod` + `node`, MiB fields,
a text-only node, an echoing node, a weekly and an hourly decoy over a nightly job), seed 20 (`hostname` +
`pod_name`, GiB fields with `gpu_mem_` names, a text-only node and an echoing one) and seed 22 (MI300X nodes:
HIP messages, no nvidia-smi).
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "sample_logs"))

import generate
from fleetgen.oom_text import format_size
from fleetgen.scenario.models import AMD, WIDE_CARDS, card_gib
from fleetgen.scenario.shapes import K8S_ALPHABET, MEMORY_FIELDS, SHAPES

SEEDS = (3, 20, 22)
TRAFFIC = 0.3
POD = re.compile(rf"^[a-z0-9-]+-[{K8S_ALPHABET}]{{9,10}}-[{K8S_ALPHABET}]{{5}}$")
PROCESS = re.compile(r"Process (\d+) has (\d+(?:\.\d+)? (?:bytes|KiB|MiB|GiB)) memory in use\.")
STAMP = re.compile(r"^(\S+) ERROR torch\.OutOfMemoryError: (.*)$")
# Where each Kubernetes style puts the pod and the node of a request row (nested objects flattened with a dot).
KUBE_KEYS = {
    "pod_node": ("pod", "node"),
    "nested": ("kubernetes.pod_name", "kubernetes.node_name"),
    "dotted": ("kubernetes.pod_name", "kubernetes.node_name"),
    "hostname": ("pod_name", "hostname"),
}


def _generate(out: Path, seed: int, *options: str) -> Path:
    argv = ["--scenario", "--seed", str(seed), "--traffic", str(TRAFFIC), "--out", str(out), *options]
    assert generate.main(argv) == 0
    return out


@pytest.fixture(scope="module")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    base = tmp_path_factory.mktemp("shapes")
    return {seed: _generate(base / f"fleet-{seed}", seed, f"--shapes={','.join(SHAPES)}") for seed in SEEDS}


@pytest.fixture(scope="module")
def truths(fleets: dict[int, Path]) -> dict[int, dict]:
    return {seed: json.loads((folder / "truths.json").read_text()) for seed, folder in fleets.items()}


def _flat(row: dict) -> dict:
    """A request row with nested objects as dotted keys (`kubernetes.pod_name`), as log pipelines flatten them."""
    out = {}
    for key, value in row.items():
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def _rows(folder: Path, host: str) -> list[dict]:
    path = folder / "requests" / f"{host}.jsonl.gz"
    return [_flat(json.loads(line)) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def _text(folder: Path, name: str) -> str:
    return gzip.decompress((folder / name).read_bytes()).decode()


def _bytes(size: str) -> float:
    """`21.32 GiB` as bytes (what format_size printed, to its rounding)."""
    number, unit = size.split()
    return float(number) * {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]


def _logged(t: dict) -> list[dict]:
    return [i for i in t["instances"] if i["log"] == "requests"]


def test_the_fleets_have_what_the_tests_rely_on(truths: dict[int, dict]) -> None:
    for t in truths.values():
        assert t["generator"]["shapes"]["drawn"] == list(SHAPES)
    three, twenty, twentytwo = (truths[s] for s in SEEDS)
    assert three["generator"]["shapes"]["kubernetes"]["style"] == "pod_node"
    assert twenty["generator"]["shapes"]["kubernetes"]["style"] == "hostname"
    assert {d["overlaps"]["cadence"] for d in three["decoys"] if "overlaps" in d} == {"weekly", "hourly"}
    for t in (three, twenty):
        assert any(i["log"] == "text" and i["ooms"] for i in t["instances"])
        assert t["generator"]["shapes"]["echo"]["hosts"]
    assert any(i["card"] in AMD and i["ooms"] for i in twentytwo["instances"])


def test_classic_fleets_have_no_shapes(tmp_path: Path) -> None:
    folder = _generate(tmp_path / "classic", 3, "--classic")
    t = json.loads((folder / "truths.json").read_text())
    assert "shapes" not in t["generator"] and "oom_records" not in t["counts"]
    row = _rows(folder, _logged(t)[0]["name"])[0]
    assert "instance" in row and "allocated_before" in row and "device_total" in row


def test_no_shape_writes_the_classic_files(tmp_path: Path) -> None:
    classic = _generate(tmp_path / "classic", 8, "--classic")
    none = _generate(tmp_path / "none", 8, "--shapes=")
    files = sorted(p.relative_to(classic) for p in classic.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(none) for p in none.rglob("*") if p.is_file())
    for name in files:  # the shapes change only what they name: without any, only truths.json says so
        same = (classic / name).read_bytes() == (none / name).read_bytes()
        assert same == (name.name != "truths.json"), name
    assert json.loads((none / "truths.json").read_text())["generator"]["shapes"]["drawn"] == []


def test_pods_are_process_lifetimes_on_their_node(fleets: dict[int, Path], truths: dict[int, dict]) -> None:
    for seed, t in truths.items():
        kube = t["generator"]["shapes"]["kubernetes"]
        pod_key, node_key = KUBE_KEYS[kube["style"]]
        every = [lt["pod"] for i in t["instances"] for lt in i["lifetimes"]]
        assert len(set(every)) == len(every) and all(POD.match(p) for p in every), seed
        for host in _logged(t):
            rows = _rows(fleets[seed], host["name"])
            assert "instance" not in rows[0] and {r[node_key] for r in rows} == {host["name"]}
            assert all(("gpu_uuid" in r) == kube["gpu_uuid"] for r in rows)
            if kube["gpu_uuid"]:
                assert {r["gpu_uuid"] for r in rows} == {host["gpu_uuid"]}
            served = list(dict.fromkeys(r[pod_key] for r in rows))  # in time order, each pod once
            assert served == [lt["pod"] for lt in host["lifetimes"] if lt["requests"]], (seed, host["name"])
            versions = {lt["pod"]: lt["version"] for lt in host["lifetimes"]}
            assert all(versions[r[pod_key]] == r["model_version"] for r in rows)


def test_text_logs_are_named_after_their_pods_and_name_the_node(
    fleets: dict[int, Path], truths: dict[int, dict]
) -> None:
    for seed, t in truths.items():
        container_pid = t["generator"]["shapes"]["pid_namespace"]["container_pid"]
        for host in t["instances"]:
            if host["log"] != "text" and not host["echo"]:
                assert [f for f in host["files"] if f.startswith("textlogs/")] == []
                continue
            pods = [lt["pod"] for lt in host["lifetimes"]]
            assert [f for f in host["files"] if f.startswith("textlogs/")] == [f"textlogs/{p}.log.gz" for p in pods]
            for pod in pods:
                first = _text(fleets[seed], f"textlogs/{pod}.log.gz").splitlines()[0]
                assert f" pod={pod} node={host['name']} pid={container_pid} serving model=" in first, first


def test_memory_fields_carry_their_unit_and_no_before(fleets: dict[int, Path], truths: dict[int, dict]) -> None:
    for seed, t in truths.items():
        units = t["generator"]["shapes"]["units"]
        names, step = units["fields"], {"mib": 1 << 20, "gib": 1 << 30}[units["unit"]]
        assert set(t["generator"]["shapes"]["no_before"]) == {"allocated_before", "reserved_before"}
        for host in _logged(t):
            rows = _rows(fleets[seed], host["name"])
            keys = set().union(*rows)
            assert not keys & set(MEMORY_FIELDS), seed  # no byte field under its canonical name
            assert not {names["allocated_before"], names["reserved_before"]} & keys
            for row in rows:
                assert row[names["allocated_after"]] <= row[names["reserved_after"]] <= row[names["device_total"]]
                assert abs(row[names["device_total"]] * step - host["device_total"]) <= step / 10 ** units["decimals"]
                if row["status"] == "oom":
                    assert row[names["allocator_allocated"]] <= row[names["reserved_memory"]]
                    assert all(isinstance(row[names[k]], int | float) for k in MEMORY_FIELDS if "before" not in k)


def _tracebacks(folder: Path, host: dict) -> list[tuple[datetime, str]]:
    out = []
    for name in host["files"]:
        if name.startswith("textlogs/"):
            for line in _text(folder, name).splitlines():
                m = STAMP.match(line)
                if m:
                    out.append((datetime.fromisoformat(m[1]), m[2]))
    return sorted(out)


def test_an_echoed_oom_is_in_both_logs_a_few_ms_apart(fleets: dict[int, Path], truths: dict[int, dict]) -> None:
    for seed, t in truths.items():
        echo = t["generator"]["shapes"]["echo"]
        low, high = echo["delay_ms"]
        records = 0
        for host in t["instances"]:
            records += len(_tracebacks(fleets[seed], host)) if host["log"] == "text" or host["echo"] else 0
            if host["log"] == "requests":
                records += sum(r["status"] == "oom" for r in _rows(fleets[seed], host["name"]))
            if not host["echo"]:
                continue
            assert host["name"] in echo["hosts"] and host["ooms"] > 0
            ooms = [r for r in _rows(fleets[seed], host["name"]) if r["status"] == "oom"]
            texts = _tracebacks(fleets[seed], host)
            assert len(ooms) == len(texts) == host["ooms"]
            for row, (at, message) in zip(ooms, texts, strict=True):
                assert message == row["error"]
                delay = (at - datetime.fromisoformat(row["ts"])).total_seconds() * 1000
                assert low <= round(delay) <= high, (seed, host["name"], delay)
        assert records == t["counts"]["oom_records"] == t["counts"]["oom_events"] + t["counts"]["ooms_in_two_logs"]


def test_a_process_in_a_pid_namespace_is_listed_as_a_process(fleets: dict[int, Path], truths: dict[int, dict]) -> None:
    for seed, t in truths.items():
        context = t["memory"]["non_pytorch"]
        assert 300 << 20 <= context <= 900 << 20
        for host in _logged(t):
            pids = {lt["pid"] for lt in host["lifetimes"]}
            for row in _rows(fleets[seed], host["name"]):
                if row["status"] != "oom":
                    continue
                message = row["error"]
                assert "Including non-PyTorch memory" not in message and "this process has" not in message
                assert message.startswith(f"{'HIP' if host['card'] in AMD else 'CUDA'} out of memory.")
                listed = PROCESS.findall(message)
                if host["card"] in AMD:
                    assert listed == []  # ROCm's messages name no process
                    continue
                assert [int(p) for p, _ in listed] == sorted(int(p) for p, _ in listed)  # NVML's order
                assert pids & {int(p) for p, _ in listed}, message  # the service itself, by its host pid
                assert f"total capacity of {format_size(host['device_total'])} of" in message
                # total = free + every process listed (the service's reserved memory and context included)
                free = _bytes(re.search(r"of which (\S+ \S+) is free", message)[1])
                used = sum(_bytes(size) for _, size in listed)
                assert abs(host["device_total"] - free - used) <= 0.005 * (1 << 30) * (len(listed) + 1), message


def test_overlapping_decoys_sit_on_a_nightly_jobs_runs(fleets: dict[int, Path], truths: dict[int, dict]) -> None:
    for seed, t in truths.items():
        jobs = {c["match"]["job"]: c for c in t["causes"] if c["kind"] == "scheduled_job"}
        jobs |= {n["job"]: n for n in t["non_causes"] if n.get("job")}
        calendar = {r["name"]: r for r in json.loads((fleets[seed] / "calendar_recurring.json").read_text())}
        for decoy in (d for d in t["decoys"] if "overlaps" in d):
            job = jobs[decoy["overlaps"]["job"]]
            assert re.fullmatch(r"\d+ \d+ \* \* \*", job["cron"])  # every night, at local 00:00-04:59
            local = datetime.fromisoformat(job["windows"][0][0]).astimezone(ZoneInfo(t["time"]["tz"]))
            assert local.hour < 5, job["cron"]
            assert decoy["hosts"] == job["hosts"] and calendar[decoy["name"]]["cron"] == decoy["cron"]
            assert decoy["gpu_memory_bytes"] == 0 and decoy["name"] not in jobs
            runs = [(datetime.fromisoformat(a), datetime.fromisoformat(b)) for a, b in job["windows"]]
            starts = [datetime.fromisoformat(a) for a, _ in decoy["windows"]]
            if decoy["overlaps"]["cadence"] == "weekly":
                assert len(starts) == 1 and any(a < starts[0] < b for a, b in runs)
            else:
                assert decoy["cron"].split()[1:] == ["*", "*", "*", "*"]
                assert all(any(a <= s < b for s in starts) for a, b in runs)


def test_new_cards_print_their_reported_totals(fleets: dict[int, Path], truths: dict[int, dict]) -> None:
    assert [card_gib(c) for c in WIDE_CARDS] == ["44.42 GiB", "79.19 GiB", "191.98 GiB"]
    for seed, t in truths.items():
        for host in t["instances"]:
            smi = fleets[seed] / "nvidia-smi" / f"{host['name']}.gpu.csv.gz"
            assert smi.exists() == (host["card"] not in AMD)  # no nvidia-smi on an AMD card


def test_the_oom_causes_name_the_rows_they_label(fleets: dict[int, Path], truths: dict[int, dict]) -> None:
    for seed, t in truths.items():
        lines = gzip.decompress((fleets[seed] / "oom_causes.csv.gz").read_bytes()).decode().splitlines()[1:]
        causes = [line.split(",") for line in lines]
        assert len(causes) == t["counts"]["oom_events"]
        ids = {h["name"]: {r["request_id"] for r in _rows(fleets[seed], h["name"])} for h in _logged(t)}
        echo = set(t["generator"]["shapes"]["echo"]["hosts"])
        logs = {h["name"]: h["log"] for h in t["instances"]}
        for instance, _, request_id, *_, source in causes:
            assert source == ("requests+text" if instance in echo else logs[instance])
            if instance in ids:
                assert request_id in ids[instance] and re.fullmatch(r"[0-9a-f]{16}", request_id)


def test_the_same_seed_gives_the_same_bytes(fleets: dict[int, Path], tmp_path: Path) -> None:
    again = _generate(tmp_path / "again", SEEDS[0], f"--shapes={','.join(SHAPES)}")
    first = fleets[SEEDS[0]]
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for name in files:
        assert (first / name).read_bytes() == (again / name).read_bytes(), name
