"""truths.json of a randomised fleet: every planted cause as kind, subject and a `match` a scorer can check,
whether it is required (enough evidence that an analysis should find it), the decoys and the non-causes."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..grounding import MIB
from ..simulate import CAPACITY, CAUSES, EXTERNAL, FRAGMENTATION, LEAK, OK
from .decoys import decoy_counts
from .models import card_gib
from .shapes import describe
from .simulate import HostSim, base_bytes, frag_reserved, memory
from .spec import Decoy, Scenario

MIN_OOMS = 8  # a cause with fewer OOMs than this is listed but not required (too little evidence)
LEAK_GROWTH = 256 * MIB  # a leak is required once one lifetime in a request log kept this much (or it caused OOMs)
RULES = {
    "required": f"a cause with at least {MIN_OOMS} OOMs; a leak also when one process lifetime in a request log "
    f"kept {LEAK_GROWTH // MIB} MiB. Causes with less evidence are listed with required false: findings that "
    "match them are neither true nor false positives, and recall does not count them",
    "leak": "match.model_version: the leaking version (a finding's subject `model_version V`)",
    "scheduled_job": "match.job: a job whose process holds GPU memory during its windows (subject `job NAME`)",
    "external_pressure": "match.job (subject `job NAME`) or, for a process no calendar lists, match.instance "
    "(subject `neighbour on instance I`)",
    "fragmentation": "match.instance (subject `instance I`)",
    "prompt_threshold": "match.device_total and match.model_version: requests above N batch x (input + output) "
    "tokens fail on that card with that version on a healthy baseline; a finding for the whole card matches "
    "every version's threshold on it",
    "capacity": "match.device_total (subject `card 21.96 GiB`): requests too large for the card on a healthy "
    "baseline with no neighbour",
    "decoys": "jobs that hold no GPU memory and change nothing: any finding naming one is a decoy blamed",
    "cron": "5-field cron in UTC; hosts are globs (fnmatch), `;` lists or `*`",
    "ooms_range": "[fewest, most] OOMs the cause would have if each failed request whose cause changes with its "
    "bytes 0.8 % (2 sd of the per-request bytes-per-token noise) smaller or larger took the other side's cause: "
    "a count outside `ooms` but inside this range is off by what no log can tell",
}


def iso(ms: int) -> str:
    return f"{datetime.fromtimestamp(ms / 1000, UTC):%Y-%m-%dT%H:%M:%S}Z"


def _cause(kind: str, subject: str, match: dict[str, Any], ooms: int, required: bool, **detail: Any) -> dict:
    return {"kind": kind, "subject": subject, "match": match, "required": required, "ooms": ooms, **detail}


def _by_host(sims: list[HostSim], mask) -> dict[str, int]:
    """OOMs per host that `mask(sim, causes)` picks with each request's planted cause."""
    out = {s.host.name: int(mask(s, s.cause).sum()) for s in sims}
    return {k: v for k, v in out.items() if v}


def _ooms_range(sims: list[HostSim], mask) -> list[int]:
    """[fewest, most] OOMs `mask` picks when each failed request at a cause's edge (HostSim.cause_low and
    cause_high) may take the cause on either side of it: how far a count can be off for want of what no log
    states, each request's own bytes per token."""
    low = high = 0
    for s in sims:
        picked = [mask(s, causes) for causes in (s.cause, s.cause_low, s.cause_high)]
        low += int((picked[0] & picked[1] & picked[2]).sum())
        high += int((picked[0] | picked[1] | picked[2]).sum())
    return [low, high]


def _leaks(scenario: Scenario, sims: list[HostSim]) -> list[dict]:
    out = []
    for vid, version in enumerate(scenario.versions):
        if not version.leak_per_request:
            continue

        def leaked(s: HostSim, causes: np.ndarray, v: int = vid) -> np.ndarray:
            return (causes == LEAK) & (s.version == v)

        by_host = _by_host(sims, leaked)
        lives = [(s, lt) for s in sims for lt in s.lifetimes if lt.version == vid]
        if not lives:
            continue
        growth = max((lt.leaked for s, lt in lives if s.host.log == "requests"), default=0)
        ooms = sum(by_host.values())
        rates = {}
        for sim in sims:
            on = sim.version == vid
            if on.sum() > 1:
                hours = (sim.req.ts[on].max() - sim.req.ts[on].min()) / 3_600_000
                rates[sim.host.name] = int(version.leak_per_request * on.sum() / max(hours, 1e-9))
        out.append(
            _cause(
                "leak",
                f"model_version {version.name}",
                {"model_version": version.name},
                ooms,
                ooms >= MIN_OOMS or growth >= LEAK_GROWTH,
                ooms_range=_ooms_range(sims, leaked),
                ooms_by_host=by_host,
                bytes_per_request=version.leak_per_request,
                bytes_per_hour=rates,
                max_lifetime_growth_bytes=growth,
                restarts=dict(Counter(lt.end_reason for _, lt in lives if lt.end_reason != "end")),
                on_oom="crash" if version.crash_on_oom else "operator restarts when OOMs pile up",
            )
        )
    return out


def _neighbours(scenario: Scenario, sims: list[HostSim]) -> tuple[list[dict], list[dict]]:
    causes, harmless = [], []
    for k, n in enumerate(scenario.neighbours):

        def mine(s: HostSim, causes: np.ndarray, k: int = k) -> np.ndarray:
            hit = np.zeros(len(causes), dtype=bool)
            rows = s.run >= 0
            hit[rows] = np.array([s.runs[r].neighbour == k for r in s.run[rows]], dtype=bool)
            return hit & (causes == EXTERNAL)

        by_host = _by_host(sims, mine)
        ooms = sum(by_host.values())
        runs = [r for s in sims for r in s.runs if r.neighbour == k]
        detail = {
            "process_name": n.process_name,
            "gpu_memory_bytes": n.bytes,
            "hosts": list(n.hosts),
            "hosts_written": n.hosts_written,
            "cron": n.cron,
            "duration_minutes": n.duration_min or None,
            "windows": [[iso(a), iso(b)] for a, b in n.windows],
            "runs_started": sum(r.started for r in runs),
            "runs_that_did_not_fit": sum(not r.started for r in runs),
            "ooms_range": _ooms_range(sims, mine),
            "ooms_by_host": by_host,
        }
        if ooms == 0:
            harmless.append({"kind": "neighbour_without_ooms", "job": n.job, **detail})
            continue
        if n.job:
            causes.append(_cause("scheduled_job", f"job {n.job}", {"job": n.job}, ooms, ooms >= MIN_OOMS, **detail))
            causes.append(_cause("external_pressure", f"job {n.job}", {"job": n.job}, ooms, ooms >= MIN_OOMS, **detail))
        else:
            host = n.hosts[0]
            causes.append(
                _cause("external_pressure", f"instance {host}", {"instance": host}, ooms, ooms >= MIN_OOMS, **detail)
            )
    return causes, harmless


def _fragmentation(scenario: Scenario, sims: list[HostSim]) -> list[dict]:
    out = []
    for sim in sims:
        frag = sim.host.fragmentation
        if frag is None:
            continue
        ooms = int(_fragmented(sim, sim.cause).sum())
        if ooms == 0:
            continue
        name = sim.host.name
        out.append(
            _cause(
                "fragmentation",
                f"instance {name}",
                {"instance": name},
                ooms,
                ooms >= MIN_OOMS,
                ooms_range=_ooms_range([sim], _fragmented),
                warmup_hours=frag.warmup_ms / 3_600_000,
                prefix_cache_bytes=frag.prefix_cache,
                reserved_when_fragmented=frag_reserved(scenario, sim.host),
                largest_free_block_median=frag.largest_free_median,
                signature="reserved_memory - allocator_allocated >= requested_size > available_memory",
            )
        )
    return out


def _capacity(scenario: Scenario, sims: list[HostSim]) -> list[dict]:
    """Per card (all logs) and per card and version (request logs: the sizes are there)."""
    out = []
    cards = {s.host.card.key: s.host.card for s in sims}
    for key, card in cards.items():
        mine = [s for s in sims if s.host.card.key == key]
        by_host = _by_host(mine, _too_large)
        ooms = sum(by_host.values())
        if ooms:
            match = {"device_total": card.device_total}
            subject = f"card {card_gib(card)}"
            edges = _ooms_range(mine, _too_large)
            detail = {"card": key, "ooms_range": edges, "ooms_by_host": by_host}
            out.append(_cause("capacity", subject, match, ooms, ooms >= MIN_OOMS, **detail))
        for vid, version in enumerate(scenario.versions):
            logged = [s for s in mine if s.host.log == "requests"]

            def too_large_on(s: HostSim, causes: np.ndarray, v: int = vid) -> np.ndarray:
                return _too_large(s, causes) & (s.version == v)

            by_host = _by_host(logged, too_large_on)
            n = sum(by_host.values())
            if not n:
                continue
            mm = memory(scenario, vid)
            out.append(
                _cause(
                    "prompt_threshold",
                    f"card {card_gib(card)}, model_version {version.name}",
                    {"device_total": card.device_total, "model_version": version.name},
                    n,
                    n >= MIN_OOMS,
                    card=key,
                    metric="batch_size * (input_sequence_length + output_sequence_length)",
                    N=mm.token_threshold(card.device_total),
                    sharpness="bytes per token vary with sd 0.4 %: requests within ~1 % of N go either way",
                    ooms_range=_ooms_range(logged, too_large_on),
                    ooms_by_host=by_host,
                )
            )
    return out


def _too_large(s: HostSim, causes: np.ndarray) -> np.ndarray:
    return causes == CAPACITY


def _fragmented(s: HostSim, causes: np.ndarray) -> np.ndarray:
    return causes == FRAGMENTATION


def _hosts(scenario: Scenario, sims: list[HostSim], sizes: dict[str, int]) -> list[dict]:
    out = []
    for sim in sims:
        h = sim.host
        out.append(
            {
                "name": h.name,
                "card": h.card.key,
                "device_total": h.card.device_total,
                "log": h.log,
                "requests": len(sim.req.ts),
                "ooms": int((sim.cause != OK).sum()),
                "ooms_by_cause": {CAUSES[c]: int((sim.cause == c).sum()) for c in range(1, len(CAUSES))},
                "deploys": [{"ts": iso(t), "version": scenario.versions[v].name} for t, v in h.deploys],
                "lifetimes": [
                    {
                        "start": iso(lt.start_ms),
                        "end": iso(lt.end_ms),
                        "version": scenario.versions[lt.version].name,
                        "end_reason": lt.end_reason,
                        "pid": lt.pid,
                        "requests": lt.requests,
                        "ooms": lt.ooms,
                        "leaked_bytes": lt.leaked,
                    }
                    for lt in sim.lifetimes
                ],
                "baseline_allocated": {scenario.versions[v].name: base_bytes(scenario, h, v) for _, v in h.deploys},
                "fragmentation": h.fragmentation is not None,
                "cache_growth_per_day": h.cache_growth_per_day,
                "bytes_written": sizes.get(h.name, 0),
            }
        )
    return out


def build_truths(
    scenario: Scenario,
    sims: list[HostSim],
    decoys: list[Decoy],
    sizes: dict[str, int],
    names: dict[str, Any] | None = None,
    files: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The whole truths.json document; a fleet with shapes adds what they changed (`generator.shapes`, each
    instance's pods, GPU UUID and files, the OOM records as written, the overlapping decoys' jobs)."""
    doc = _classic_truths(scenario, sims, decoys, sizes)
    if scenario.shapes is None:
        return doc
    return _shaped(doc, scenario, sims, decoys, names or {}, files or {})


def _classic_truths(
    scenario: Scenario, sims: list[HostSim], decoys: list[Decoy], sizes: dict[str, int]
) -> dict[str, Any]:
    neighbour_causes, harmless = _neighbours(scenario, sims)
    causes = [*_leaks(scenario, sims), *neighbour_causes, *_fragmentation(scenario, sims), *_capacity(scenario, sims)]
    non_causes = harmless + [
        {"kind": "cache_growth", "instance": s.host.name, "reserved_growth_per_day": s.host.cache_growth_per_day}
        for s in sims
        if s.host.cache_growth_per_day
    ]
    logged = [s for s in sims if s.host.log == "requests"]
    return {
        "generator": {"mode": "scenario", "seed": scenario.seed},
        "time": {
            "start": iso(scenario.start_ms),
            "end": iso(scenario.end_ms),
            "tz": scenario.tz,
            "style": scenario.style,
            "ingest_tz": scenario.ingest_tz,
            "cron_tz": "UTC",
            "peak_hour_local": scenario.peak_hour_local,
            "peak_hour_utc": scenario.traffic.peak_hour_utc,
        },
        "rules": RULES,
        "causes": causes,
        "decoys": [
            {
                "name": d.name,
                "cron": d.cron,
                "duration_minutes": d.duration_min,
                "hosts_written": d.hosts_written,
                "hosts": list(d.hosts),
                "windows": [[iso(a), iso(b)] for a, b in d.windows],
                "gpu_memory_bytes": 0,
                **decoy_counts(d, sims),
            }
            for d in decoys
        ],
        "non_causes": non_causes,
        "counts": {
            "requests": sum(len(s.req.ts) for s in logged),
            "requests_in_text_logs": sum(len(s.req.ts) for s in sims if s.host.log == "text"),
            "ooms_request_logs": sum(int((s.cause != OK).sum()) for s in logged),
            "oom_events": sum(int((s.cause != OK).sum()) for s in sims),
            "by_cause": {CAUSES[c]: sum(int((s.cause == c).sum()) for s in sims) for c in range(1, len(CAUSES))},
        },
        "memory": {"non_pytorch": scenario.non_pytorch, "efficiency": scenario.efficiency},
        "traffic": {
            "batch_p": [round(p, 4) for p in scenario.traffic.batch_p],
            "prompt_median": scenario.traffic.prompt_median,
            "output_median": scenario.traffic.output_median,
            "max_batched_tokens": scenario.traffic.max_batched_tokens,
        },
        "policy": {
            "operator_ooms": scenario.policy.operator_ooms,
            "operator_window_minutes": scenario.policy.operator_window_ms // 60_000,
            "operator_delay_minutes": [x // 60_000 for x in scenario.policy.operator_delay_ms],
            "crash_downtime_s": scenario.policy.crash_downtime_ms // 1000,
        },
        "model_versions": [
            {
                "name": v.name,
                "family": v.family,
                "dtype": v.model.dtype,
                "params": v.model.params,
                "weights_bytes": v.model.weights_bytes,
                "bytes_per_token": v.model.bytes_per_token,
                "leak_per_request": v.leak_per_request,
                "leak_rate_per_hour": v.leak_rate_per_hour,
                "crash_on_oom": v.crash_on_oom,
            }
            for v in scenario.versions
        ],
        "instances": _hosts(scenario, sims, sizes),
    }


SHAPED_RULES = {
    "device": "one device per GPU: an instance is the host, on Kubernetes the node (never a pod: every process "
    "lifetime is a pod with a new name); `match.gpu_uuid`, where the logs state it, names the same GPU",
    "ooms": "each found cause's OOM count (the finding's own count: leak_ooms, ooms_in for scheduled_job, "
    "ooms_by_size for prompt_threshold, ooms otherwise) is compared with the planted `ooms`, one per real "
    "OOM however many files hold it (counts.oom_records counts the records as written); within 5 % passes",
    "decoys_overlapping": "a decoy with `overlaps` runs over a causal job's runs on its hosts on purpose: blaming it "
    "is blaming a decoy",
}


def _shaped(
    doc: dict[str, Any],
    scenario: Scenario,
    sims: list[HostSim],
    decoys: list[Decoy],
    names: dict[str, Any],
    files: dict[str, list[str]],
) -> dict[str, Any]:
    """What the shapes add to truths.json."""
    assert scenario.shapes is not None
    shapes = scenario.shapes
    doc["generator"]["shapes"] = describe(shapes)
    doc["rules"] = {**doc["rules"], **SHAPED_RULES}
    uuids = {h: n.gpu_uuid for h, n in names.items() if n.gpu_uuid}
    for cause in doc["causes"]:
        host = cause["match"].get("instance")
        if host in uuids:
            cause["match"]["gpu_uuid"] = uuids[host]
    for decoy, entry in zip(decoys, doc["decoys"], strict=True):
        if decoy.overlaps:
            entry["overlaps"] = {"job": decoy.overlaps, "cadence": decoy.cadence}
    for sim, entry in zip(sims, doc["instances"], strict=True):
        own = names.get(sim.host.name)
        entry["gpu_uuid"] = own.gpu_uuid if own else None
        entry["files"] = files.get(sim.host.name, [])
        entry["echo"] = sim.host.name in shapes.echo_hosts
        if own and own.pods:
            for life, pod in zip(entry["lifetimes"], own.pods, strict=True):
                life["pod"] = pod
    ooms = {s.host.name: int((s.cause != OK).sum()) for s in sims}
    doc["counts"]["oom_records"] = sum(n * (2 if h in shapes.echo_hosts else 1) for h, n in ooms.items())
    doc["counts"]["ooms_in_two_logs"] = sum(n for h, n in ooms.items() if h in shapes.echo_hosts)
    return doc
