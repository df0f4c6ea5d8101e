"""Generate one randomised fleet: draw, simulate every host, place decoys, write the files and truths.json."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..gz import write_gzip, write_text
from .decoys import draw_decoys, overlap_decoys
from .draw import draw
from .models import AMD
from .shapes import draw_shapes, gpu_uuid, k8s_name
from .simulate import HostSim, simulate_host
from .spec import Decoy, Neighbour, Scenario
from .truths import build_truths
from .write import (
    Names,
    cause_rows,
    messages,
    stamp_one,
    write_request_log,
    write_smi,
    write_text_log,
    write_text_logs,
)

DATA = ("requests", "textlogs", "nvidia-smi", "calendar_recurring.json", "calendar_occurrences.csv")


def data_paths(folder: Path) -> list[Path]:
    """What `oomlab ingest` should read of a generated fleet (not truths.json or the cause file)."""
    return [folder / name for name in DATA if (folder / name).exists()]


def build_scenario(
    out: Path, seed: int, traffic_scale: float = 1.0, classic: bool = False, forced: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """Write the fleet of `seed` under `out` (which must not hold another one); return truths.json's content.
    `classic`: the fleet without the shapes of shapes.py, byte for byte what earlier versions wrote; else each
    shape drawn at random, or exactly the `forced` ones."""
    shapes = None if classic else draw_shapes(seed, forced)
    scenario = draw(seed, traffic_scale, shapes)
    sims = [simulate_host(scenario, i) for i in range(len(scenario.hosts))]
    decoys = draw_decoys(np.random.default_rng(np.random.SeedSequence([seed, 99])), scenario, sims)
    if shapes is not None:
        decoys += overlap_decoys(np.random.default_rng(np.random.SeedSequence([seed, 2027, 3])), scenario, sims)
        scenario = replace(scenario, shapes=replace(shapes, echo_hosts=_echo_hosts(seed, scenario, sims)))
    names = host_names(scenario, sims)
    sizes: dict[str, int] = {}
    files: dict[str, list[str]] = {}
    causes = ["instance,ts,request_id,cause,subject,leak_too,source\n"]
    for i, sim in enumerate(sims):
        texts = messages(scenario, sim)
        name = sim.host.name
        if scenario.shapes is None:
            if sim.host.log == "requests":
                sizes[name] = write_request_log(out / "requests" / f"{name}.jsonl.gz", scenario, sim, texts)
            else:
                sizes[name] = write_text_log(out / "textlogs" / f"{name}.log.gz", scenario, sim, texts)
            source = None
        else:
            sizes[name], files[name], source = _write_logs(out, scenario, sim, texts, names[name], i)
        if scenario.shapes is None or sim.host.card.key not in AMD:  # ROCm hosts have no nvidia-smi
            rng = np.random.default_rng(np.random.SeedSequence([seed, i, 11]))
            sizes[name] += write_smi(out / "nvidia-smi", scenario, sim, rng)
        causes += cause_rows(scenario, sim, source)
    write_gzip(out / "oom_causes.csv.gz", ["".join(causes).encode()], 6)
    write_calendars(out, scenario, decoys)
    truths = build_truths(scenario, sims, decoys, sizes, names, files)
    write_text(out / "truths.json", json.dumps(truths, indent=1) + "\n")
    return truths


def _write_logs(
    out: Path, scenario: Scenario, sim: HostSim, texts: list[str], names: Names, index: int
) -> tuple[int, list[str], str]:
    """A host's logs in a fleet with shapes: (bytes, file names, the source its OOMs are in)."""
    assert scenario.shapes is not None
    name, size, files = sim.host.name, 0, []
    echo = name in scenario.shapes.echo_hosts
    if sim.host.log == "requests":
        size += write_request_log(out / "requests" / f"{name}.jsonl.gz", scenario, sim, texts, names)
        files.append(f"requests/{name}.jsonl.gz")
    if sim.host.log == "text" or echo:
        rng = np.random.default_rng(np.random.SeedSequence([scenario.seed, index, 2027, 7]))
        written, logs = write_text_logs(out / "textlogs", scenario, sim, texts, names, echo, rng)
        size += written
        files += [f"textlogs/{f}" for f in logs]
    return size, files, "requests+text" if echo else sim.host.log


def _echo_hosts(seed: int, scenario: Scenario, sims: list[HostSim]) -> tuple[str, ...]:
    """Shape `echo`: one host with a request log and OOMs, or up to half of them, also writes a text log."""
    assert scenario.shapes is not None
    if not scenario.shapes.echo:
        return ()
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2027, 4]))
    ok = [s.host.name for s in sims if s.host.log == "requests" and s.cause.any()]
    if not ok:
        return ()
    count = int(rng.integers(1, max(1, len(ok) // 2) + 1))
    return tuple(sorted(str(h) for h in rng.choice(ok, count, replace=False)))


def host_names(scenario: Scenario, sims: list[HostSim]) -> dict[str, Names]:
    """Per host: its node name, GPU UUID and, on Kubernetes, a new pod name for every process lifetime
    (`<deployment>-<pod-template hash of the version>-<5 characters>`)."""
    shapes = scenario.shapes
    if shapes is None or shapes.kube is None:
        return {s.host.name: Names(s.host.name) for s in sims}
    kube = shapes.kube
    rng = np.random.default_rng(np.random.SeedSequence([scenario.seed, 2027, 6]))
    hashes = {v.name: k8s_name(rng, int(rng.choice([9, 10]))) for v in scenario.versions}
    taken: set[str] = set()
    out = {}
    for sim in sims:
        uuid = gpu_uuid(rng) if kube.gpu_uuid else None
        pods = []
        for life in sim.lifetimes:
            version = scenario.versions[life.version]
            while True:
                pod = f"{kube.deployment.format(family=version.family)}-{hashes[version.name]}-{k8s_name(rng, 5)}"
                if pod not in taken:
                    break
            taken.add(pod)
            pods.append(pod)
        out[sim.host.name] = Names(sim.host.name, uuid, tuple(pods))
    return out


def write_calendars(out: Path, scenario: Scenario, decoys: list[Decoy]) -> None:
    """calendar_recurring.json (cron rules, UTC) and calendar_occurrences.csv; causes and decoys mixed, by name."""
    jobs: list[Neighbour | Decoy] = [n for n in scenario.neighbours if n.job] + list(decoys)
    jobs.sort(key=lambda j: _name(j))
    recurring = [
        {"name": _name(j), "cron": j.cron, "duration_minutes": j.duration_min, "hosts": _hosts_json(j.hosts_written)}
        for j in jobs
        if j.cron
    ]
    write_text(out / "calendar_recurring.json", json.dumps(recurring, indent=2) + "\n")
    rows = ["name,start,end,hosts"]
    for job in jobs:
        if not job.cron:
            rows += [
                f"{_name(job)},{stamp_one(a, scenario)},{stamp_one(b, scenario)},{job.hosts_written}"
                for a, b in job.windows
            ]
    write_text(out / "calendar_occurrences.csv", "\n".join(rows) + "\n")


def _name(job: Neighbour | Decoy) -> str:
    return job.name if isinstance(job, Decoy) else str(job.job)


def _hosts_json(written: str) -> str | list[str]:
    return "*" if written == "*" else written.split(";")


def summary(truths: dict[str, Any]) -> str:
    """One line about a generated fleet."""
    counts = truths["counts"]
    kinds = ", ".join(f"{c['kind']} {c['subject']}{'' if c['required'] else ' (optional)'}" for c in truths["causes"])
    shapes = truths["generator"].get("shapes")
    drawn = "" if shapes is None else f"; shapes: {', '.join(shapes['drawn']) or 'none'}"
    return (
        f"seed {truths['generator']['seed']}: {len(truths['instances'])} hosts, "
        f"{counts['requests'] + counts['requests_in_text_logs']:,} requests, {counts['oom_events']:,} OOMs; "
        f"causes: {kinds or 'none'}; decoys: {', '.join(d['name'] for d in truths['decoys']) or 'none'}{drawn}"
    )
