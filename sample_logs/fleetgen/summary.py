"""What one simulated instance adds to truths.json: counts, restarts, and requests inside job windows."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from .plan import FleetPlan, Job
from .schedule import in_windows, job_windows
from .simulate import CAUSES, Simulated, leak_per_request


def iso(ts_ms: int) -> str:
    """Epoch ms as ISO 8601 UTC with Z (seconds, or ms when not whole)."""
    moment = datetime.fromtimestamp(ts_ms // 1000, UTC)
    ms = ts_ms % 1000
    return f"{moment:%Y-%m-%dT%H:%M:%S}" + (f".{ms:03d}Z" if ms else "Z")


def window_counts(sim: Simulated, job: Job, plan: FleetPlan) -> dict[str, int]:
    """Requests and OOMs of this instance inside `job`'s windows (zero when the job skips this host)."""
    if sim.inst.name not in job.hosts:
        return {"requests": 0, "ooms": 0}
    inside = in_windows(sim.req.ts, job_windows(job, plan.start_ms, plan.end_ms))
    return {"requests": int(inside.sum()), "ooms": int((inside & (sim.cause > 0)).sum())}


def instance_summary(sim: Simulated, plan: FleetPlan, versions: list[str], size: int) -> dict[str, object]:
    """The per-instance part of truths.json."""
    by_cause = {name: int((sim.cause == code).sum()) for code, name in enumerate(CAUSES) if code}
    backup_in = window_counts(sim, plan.backup, plan) if plan.backup else {"requests": 0, "ooms": 0}
    return {
        "name": sim.inst.name,
        "card": sim.inst.card.key,
        "log": sim.inst.log,
        "traffic_weight": sim.inst.weight,
        "requests": len(sim.req.ts),
        "ooms": int((sim.cause > 0).sum()),
        "ooms_by_cause": by_cause,
        "external_pressure_with_leak": int(sim.leak_too.sum()),
        "bytes_written": size,
        "deploys": [{"ts": iso(t), "version": v} for t, v in plan.deploys(sim.inst)],
        "restarts": [
            {"ts": iso(r.ts_ms), "reason": r.reason, "version": versions[r.version]} for r in sim.lifetimes.restarts
        ],
        "leak_bytes_per_hour": _leak_rate(sim, plan),
        "backup_window": backup_in,
        "outside_backup": {
            "requests": len(sim.req.ts) - backup_in["requests"],
            "ooms": int((sim.cause > 0).sum()) - backup_in["ooms"],
        },
        "decoy_windows": {job.name: window_counts(sim, job, plan) for job in plan.decoys},
    }


def _leak_rate(sim: Simulated, plan: FleetPlan) -> int:
    """Average bytes per hour the leaking version kept on this instance (0 if it never ran it)."""
    leaking = [i for i, v in enumerate(plan.versions) if v.leaks]
    on = np.isin(sim.version, leaking)
    if not on.any():
        return 0
    hours = (sim.req.ts[on].max() - sim.req.ts[on].min()) / 3_600_000
    return int(leak_per_request(plan) * on.sum() / max(hours, 1e-9))
