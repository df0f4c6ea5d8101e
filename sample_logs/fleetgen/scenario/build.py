"""Generate one randomised fleet: draw, simulate every host, place decoys, write the files and truths.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..gz import write_gzip, write_text
from .decoys import draw_decoys
from .draw import draw
from .simulate import simulate_host
from .spec import Decoy, Neighbour, Scenario
from .truths import build_truths
from .write import cause_rows, messages, stamp_one, write_request_log, write_smi, write_text_log

DATA = ("requests", "textlogs", "nvidia-smi", "calendar_recurring.json", "calendar_occurrences.csv")


def data_paths(folder: Path) -> list[Path]:
    """What `oomlab ingest` should read of a generated fleet (not truths.json or the cause file)."""
    return [folder / name for name in DATA if (folder / name).exists()]


def build_scenario(out: Path, seed: int, traffic_scale: float = 1.0) -> dict[str, Any]:
    """Write the fleet of `seed` under `out` (which must not hold another one); return truths.json's content."""
    scenario = draw(seed, traffic_scale)
    sims = [simulate_host(scenario, i) for i in range(len(scenario.hosts))]
    decoys = draw_decoys(np.random.default_rng(np.random.SeedSequence([seed, 99])), scenario, sims)
    sizes = {}
    causes = ["instance,ts,request_id,cause,subject,leak_too,source\n"]
    for i, sim in enumerate(sims):
        texts = messages(scenario, sim)
        name = sim.host.name
        if sim.host.log == "requests":
            sizes[name] = write_request_log(out / "requests" / f"{name}.jsonl.gz", scenario, sim, texts)
        else:
            sizes[name] = write_text_log(out / "textlogs" / f"{name}.log.gz", scenario, sim, texts)
        rng = np.random.default_rng(np.random.SeedSequence([seed, i, 11]))
        sizes[name] += write_smi(out / "nvidia-smi", scenario, sim, rng)
        causes += cause_rows(scenario, sim)
    write_gzip(out / "oom_causes.csv.gz", ["".join(causes).encode()], 6)
    write_calendars(out, scenario, decoys)
    truths = build_truths(scenario, sims, decoys, sizes)
    write_text(out / "truths.json", json.dumps(truths, indent=1) + "\n")
    return truths


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
    return (
        f"seed {truths['generator']['seed']}: {len(truths['instances'])} hosts, "
        f"{counts['requests'] + counts['requests_in_text_logs']:,} requests, {counts['oom_events']:,} OOMs; "
        f"causes: {kinds or 'none'}; decoys: {', '.join(d['name'] for d in truths['decoys']) or 'none'}"
    )
