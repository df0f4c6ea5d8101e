"""Generate the whole fleet: every instance in parallel, then calendars, OOM causes and truths.json."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .grounding import MIB, MemoryModel, fleet_memory_model
from .gz import write_gzip
from .plan import DEFAULT_SCALE, FleetPlan, Instance, make_plan
from .processes import assign_pids, oom_messages
from .schedule import in_windows, job_windows
from .simulate import simulate
from .summary import instance_summary
from .truths import write_calendars, write_truths
from .write_requests import cause_rows, write_request_log
from .write_smi import write_smi
from .write_text import write_text_log


@dataclass(frozen=True)
class Options:
    """How much to generate and where."""

    out: Path
    seed: int = 7
    scale: float = DEFAULT_SCALE
    weeks: int = 3
    smi_interval_s: int | None = None  # None: 300 s for small fleets, 60 s above 2M requests
    gzip_level: int | None = None  # None: 9 for small fleets, 1 above 2M requests
    workers: int = 2


def build(opts: Options) -> dict[str, Any]:
    """Write the fleet under `opts.out`; return truths.json's content."""
    started = time.perf_counter()
    plan = make_plan(opts.seed, opts.scale, opts.weeks)
    small = plan.total_requests <= 2_000_000
    level = opts.gzip_level or (9 if small else 1)  # the committed set is small; big ones are written fast
    opts = replace(opts, smi_interval_s=opts.smi_interval_s or (300 if small else 60))
    model = fleet_memory_model()
    with ThreadPoolExecutor(opts.workers) as pool:
        results = list(pool.map(lambda i: _instance(plan, i, model, opts, level), range(len(plan.instances))))
    summaries = [r[0] for r in results]
    causes = [row for r in results for row in r[1]]
    body = "instance,ts,request_id,cause,leak_too,source\n" + "".join(
        f"{i},{ts},{rid},{c},{str(lt).lower()},{src}\n" for i, ts, rid, c, lt, src in causes
    )
    write_gzip(opts.out / "oom_causes.csv.gz", [body.encode()], level)
    write_calendars(opts.out, plan)
    return write_truths(opts.out, plan, model, summaries, opts, time.perf_counter() - started)


def _instance(
    plan: FleetPlan, idx: int, model: MemoryModel, opts: Options, level: int
) -> tuple[dict[str, object], list[tuple[str, str, str, str, bool, str]]]:
    """Simulate one instance and write its files."""
    job = plan.backup
    assert job is not None
    inst = plan.instances[idx]
    windows = job_windows(job, plan.start_ms, plan.end_ms)

    def backup(host: Instance, ts: np.ndarray) -> np.ndarray:
        on = in_windows(ts, windows) & (host.name in job.hosts)
        return np.where(on, job.gpu_mib * MIB, 0).astype(np.int64)

    sim = simulate(plan, idx, model, backup)
    versions = [v.name for v in plan.versions]
    pids = assign_pids(plan.seed, idx, sim.lifetimes.starts_ms, windows, inst.name in job.hosts)
    messages = oom_messages(sim, model, pids, windows)
    if inst.log == "requests":
        size = write_request_log(opts.out / "requests" / f"{inst.name}.jsonl.gz", sim, versions, messages, level)
    else:
        size = write_text_log(opts.out / "textlogs" / f"{inst.name}.log.gz", sim, versions, messages, pids, level)
    rng = np.random.default_rng(np.random.SeedSequence([plan.seed, idx, 11]))
    size += write_smi(
        opts.out / "nvidia-smi", plan, sim, model, pids, job, windows, opts.smi_interval_s or 300, level, rng
    )
    rows = [(*row, inst.log) for row in cause_rows(sim)]
    return instance_summary(sim, plan, versions, size), rows
