"""The calendar files and truths.json: every planted cause with the parameters that produced it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .grounding import MemoryModel, grounding_summary
from .gz import write_text
from .plan import CACHE_NOTE, DEPLOY_DOWNTIME_MS, WATCHDOG_DOWNTIME_MS, WATCHDOG_FRACTION, FleetPlan
from .schedule import job_windows
from .simulate import (
    CACHE_GROWTH_PER_DAY,
    FRAG_LARGEST_FREE_MEDIAN,
    FRAG_WARMUP_MS,
    _frag_reserved,
    leak_per_request,
)
from .summary import iso
from .traffic import MAX_BATCHED_TOKENS

CAUSE_RULES = {
    "capacity": "fails with the healthy baseline and no backup running: b x (in + out) above the card's N",
    "external_pressure": "fails only because the backup's process holds memory (with a healthy baseline)",
    "leak": "fails only because the leaking version raised allocated_before above the healthy baseline",
    "fragmentation": "a100-05 only: would fit, but no free block in its pinned segments is large enough",
    "leak_too": "external_pressure that also needed the leaked baseline (none in the default fleet)",
    "file": "oom_causes.csv.gz has one row per OOM: instance, ts, request_id, cause, leak_too, source",
}


def write_calendars(out: Path, plan: FleetPlan) -> None:
    """calendar_recurring.json (cron jobs) and calendar_occurrences.csv (one-off and explicit windows)."""
    jobs = [j for j in (plan.backup, *plan.decoys) if j is not None]
    recurring = [
        {"name": j.name, "cron": j.cron, "duration_minutes": j.duration_min, "hosts": list(j.hosts)}
        for j in jobs
        if j.cron
    ]
    write_text(out / "calendar_recurring.json", json.dumps(recurring, indent=2) + "\n")
    rows = ["name,start,end,hosts"]
    for job in jobs:
        rows += [
            f"{job.name},{iso(a)},{iso(b)},{';'.join(job.hosts)}"
            for a, b in job_windows(job, plan.start_ms, plan.end_ms)
            if not job.cron
        ]
    write_text(out / "calendar_occurrences.csv", "\n".join(rows) + "\n")


def _sum(summaries: list[dict[str, Any]], key: str, log: str | None = None) -> dict[str, int]:
    """Per-cause totals over instances (of one log kind when given)."""
    total: dict[str, int] = {}
    for s in summaries:
        if log is None or s["log"] == log:
            for cause, n in s[key].items():
                total[cause] = total.get(cause, 0) + n
    return total


def _counts(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Request and OOM totals as oomlab ingest should find them."""
    req = [s for s in summaries if s["log"] == "requests"]
    text = [s for s in summaries if s["log"] == "text"]
    return {
        "requests": sum(s["requests"] for s in req),
        "requests_in_text_logs": sum(s["requests"] for s in text),
        "ooms_request_logs": sum(s["ooms"] for s in req),
        "ooms_text_logs": sum(s["ooms"] for s in text),
        "oom_events": sum(s["ooms"] for s in summaries),
        "by_cause": _sum(summaries, "ooms_by_cause"),
        "by_cause_request_logs": _sum(summaries, "ooms_by_cause", "requests"),
        "by_cause_text_logs": _sum(summaries, "ooms_by_cause", "text"),
        "external_pressure_with_leak": sum(s["external_pressure_with_leak"] for s in summaries),
    }


def _by_host(summaries: list[dict[str, Any]], cause: str) -> dict[str, int]:
    """OOMs of one cause per instance, instances without any left out."""
    return {s["name"]: s["ooms_by_cause"][cause] for s in summaries if s["ooms_by_cause"][cause]}


def _backup(plan: FleetPlan, model: MemoryModel, summaries: list[dict[str, Any]]) -> dict[str, Any]:
    job = plan.backup
    assert job is not None
    affected = _by_host(summaries, "external_pressure")
    a10 = next(i.card for i in plan.instances if i.card.key == "A10")
    return {
        "job": job.name,
        "cron": job.cron,
        "window_utc": "01:00-02:30",
        "duration_minutes": job.duration_min,
        "calendar_hosts": list(job.hosts),
        "affected_hosts": sorted(affected),
        "unaffected_hosts": sorted(set(job.hosts) - set(affected)),
        "process_name": job.process_name,
        "gpu_memory_mib": job.gpu_mib,
        "message_names_it_as": "Process <pid> has 10.10 GiB memory in use (a new pid every night)",
        "a10_token_threshold_while_running": model.token_threshold(a10.device_total, job.gpu_mib << 20),
        "ooms": sum(affected.values()),
        "ooms_by_host": affected,
        "in_window": {s["name"]: s["backup_window"] for s in summaries if s["name"] in job.hosts},
        "outside_window": {s["name"]: s["outside_backup"] for s in summaries if s["name"] in job.hosts},
    }


def _leak(plan: FleetPlan, summaries: list[dict[str, Any]]) -> dict[str, Any]:
    leaking = next(v for v in plan.versions if v.leaks)
    fixed = plan.versions[plan.versions.index(leaking) + 1]

    def deploys(name: str) -> dict[str, str]:
        return {s["name"]: d["ts"] for s in summaries for d in s["deploys"] if d["version"] == name}

    return {
        "model_version": leaking.name,
        "deploys": deploys(leaking.name),
        "fixed_by": fixed.name,
        "fix_deploys": deploys(fixed.name),
        "rollout_paused_before": [i.name for i in plan.instances if i.name not in leaking.rollout],
        "bytes_per_request": leak_per_request(plan),
        "bytes_per_hour": {s["name"]: s["leak_bytes_per_hour"] for s in summaries if s["leak_bytes_per_hour"]},
        "watchdog": f"restart when allocated_after >= {WATCHDOG_FRACTION:.0%} of device_total "
        f"(down {WATCHDOG_DOWNTIME_MS // 1000} s)",
        "watchdog_restarts": {
            s["name"]: [r["ts"] for r in s["restarts"] if r["reason"] == "watchdog"]
            for s in summaries
            if any(r["reason"] == "watchdog" for r in s["restarts"])
        },
        "ooms": sum(_by_host(summaries, "leak").values()),
        "ooms_by_host": _by_host(summaries, "leak"),
    }


def _threshold(plan: FleetPlan, model: MemoryModel, summaries: list[dict[str, Any]]) -> dict[str, Any]:
    cards = {i.card.key: i.card for i in plan.instances}
    return {
        "card": "A10",
        "device_total": cards["A10"].device_total,
        "metric": "batch_size * (input_sequence_length + output_sequence_length)",
        "N": model.token_threshold(cards["A10"].device_total),
        "sharpness": "bytes per token vary with sd 0.4 %: requests within ~1 % of N go either way",
        "applies_when": "healthy baseline (allocated_before == baseline_allocated) and no backup running",
        "A100_N": model.token_threshold(cards["A100"].device_total),
        "max_batched_tokens": MAX_BATCHED_TOKENS,
        "note": "A100_N is above the scheduler's cap, so A100s never hit it",
        "ooms": sum(_by_host(summaries, "capacity").values()),
        "ooms_by_host": _by_host(summaries, "capacity"),
    }


def _fragmentation(plan: FleetPlan, model: MemoryModel, summaries: list[dict[str, Any]]) -> dict[str, Any]:
    inst = next(i for i in plan.instances if i.fragmentation)
    return {
        "instance": inst.name,
        "warmup_hours": FRAG_WARMUP_MS // 3_600_000,
        "prefix_cache_bytes": inst.prefix_cache,
        "allocated_baseline": model.baseline_allocated + inst.prefix_cache,
        "reserved_when_fragmented": _frag_reserved(inst, model),
        "largest_free_block_median": FRAG_LARGEST_FREE_MEDIAN,
        "signature": "reserved_memory - allocator_allocated >= 2 x requested_size > available_memory",
        "ooms": sum(_by_host(summaries, "fragmentation").values()),
        "ooms_by_host": _by_host(summaries, "fragmentation"),
    }


def _decoys(plan: FleetPlan, summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for job in plan.decoys:
        inside = [s["decoy_windows"][job.name] for s in summaries]
        # what the window would hold at each host's OOM rate outside the backup's windows
        expected = sum(
            s["decoy_windows"][job.name]["requests"]
            * s["outside_backup"]["ooms"]
            / max(s["outside_backup"]["requests"], 1)
            for s in summaries
        )
        out.append(
            {
                "name": job.name,
                "cron": job.cron,
                "duration_minutes": job.duration_min,
                "hosts": list(job.hosts),
                "gpu_memory_mib": 0,
                "requests_inside": sum(c["requests"] for c in inside),
                "ooms_inside": sum(c["ooms"] for c in inside),
                "ooms_expected_from_traffic": round(expected, 1),
            }
        )
    return out


def write_truths(
    out: Path, plan: FleetPlan, model: MemoryModel, summaries: list[dict[str, Any]], opts: Any, seconds: float
) -> dict[str, Any]:
    """Assemble and write truths.json."""
    growth = next(i for i in plan.instances if i.cache_growth)
    truths = {
        "generator": {
            "seed": plan.seed,
            "scale": plan.scale,
            "weeks": plan.weeks,
            "smi_interval_s": opts.smi_interval_s,
            "start": iso(plan.start_ms),
            "end": iso(plan.end_ms),
            "deploy_downtime_s": DEPLOY_DOWNTIME_MS // 1000,
        },
        "counts": _counts(summaries),
        "cause_rules": CAUSE_RULES,
        "backup": _backup(plan, model, summaries),
        "leak": _leak(plan, summaries),
        "prompt_threshold": _threshold(plan, model, summaries),
        "fragmentation": _fragmentation(plan, model, summaries),
        "cache_growth": {
            "instance": growth.name,
            "reserved_growth_per_day": CACHE_GROWTH_PER_DAY,
            "note": CACHE_NOTE,
            "ooms": next(s["ooms"] for s in summaries if s["name"] == growth.name),
        },
        "decoys": _decoys(plan, summaries),
        "memory_model": grounding_summary(),
        "cards": {
            i.card.key: {
                "smi_name": i.card.smi_name,
                "smi_total_mib": i.card.smi_total_mib,
                "device_total": i.card.device_total,
            }
            for i in plan.instances
        },
        "model_versions": [{"name": v.name, "leaks": v.leaks} for v in plan.versions],
        "instances": summaries,
    }
    write_text(out / "truths.json", json.dumps(truths, indent=1) + "\n")
    return truths
