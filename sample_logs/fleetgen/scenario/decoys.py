"""Decoy jobs: calendar entries that hold no GPU memory and change nothing, placed after the simulation so
that none of their windows overlaps a neighbour's run or a leak's pile-up of OOMs on the same host; and, with
the shape `overlap`, decoys placed over a nightly neighbour job's runs on purpose (a weekly one over one run,
an hourly one over all of them), for attribution under overlap."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from ..plan import HOUR_MS
from ..schedule import cron_starts
from ..simulate import OK
from .neighbours import draw_schedule, select_hosts
from .simulate import HostSim
from .spec import Decoy, Scenario

DECOY_NAMES = ("log-rotate", "metrics-export", "cert-renew", "disk-scrub", "config-sync", "db-vacuum", "report-mail")
MARGIN_MS = HOUR_MS // 4
MIN_REQUESTS_INSIDE = 30
OVERLAP_NAMES = {
    "weekly": ("weekly-report", "security-scan", "backup-verify"),
    "hourly": ("health-probe", "cache-warm", "metrics-rollup"),
}


def busy_spans(scenario: Scenario, sims: list[HostSim]) -> dict[str, list[tuple[int, int]]]:
    """Per host, the times a decoy must keep clear of: neighbour runs, and leaks' OOM pile-ups."""
    out: dict[str, list[tuple[int, int]]] = {h.name: [] for h in scenario.hosts}
    for n in scenario.neighbours:
        for host in n.hosts:
            out[host] += [(a - MARGIN_MS, b + MARGIN_MS) for a, b in n.windows]
    for sim in sims:
        for life in sim.lifetimes:
            if life.first_leak_oom_ms is not None:
                out[sim.host.name].append((life.first_leak_oom_ms - 2 * MARGIN_MS, life.end_ms + MARGIN_MS))
    return out


def draw_decoys(rng: np.random.Generator, scenario: Scenario, sims: list[HostSim]) -> list[Decoy]:
    """One to three decoys, cron rules (day lists, globs) or explicit occurrences."""
    busy = busy_spans(scenario, sims)
    by_host = {s.host.name: s for s in sims}
    taken = {n.job for n in scenario.neighbours}
    names = [str(n) for n in rng.permutation(DECOY_NAMES) if n not in taken]
    wanted, out = int(rng.integers(1, 4)), []
    for name in names * 4:
        if len(out) == wanted:
            break
        if any(d.name == name for d in out):
            continue
        # mostly on hosts that have OOMs: a decoy is only a test where there is something to blame it for
        failing = rng.random() < 0.7 and any(s.cause.any() for s in sims)
        picked = select_hosts(rng, scenario, lambda h, f=failing: not f or bool(by_host[h.name].cause.any()))
        if picked is None:
            break
        written, hosts = picked
        cron, duration, windows = draw_schedule(rng, scenario)
        if not windows or any(_overlaps(windows, busy[h]) for h in hosts):
            continue
        inside = sum(int(_inside(by_host[h].req.ts, windows).sum()) for h in hosts)
        if inside >= MIN_REQUESTS_INSIDE:
            out.append(Decoy(name, hosts, windows, cron, duration, written))
    return out


def overlap_decoys(rng: np.random.Generator, scenario: Scenario, sims: list[HostSim]) -> list[Decoy]:
    """Decoys over a nightly job's runs, on its hosts (shape `overlap`): a weekly one starting inside one of its
    runs (20-90 minutes; the data's 2-3 days hold one run of it), an hourly one (5-20 minutes every hour, so
    inside every run of the job). None when the fleet has no nightly job (no host had room for one)."""
    shapes = scenario.shapes
    nightly = [(k, n) for k, n in enumerate(scenario.neighbours) if n.job and _is_daily(n.cron)]
    if shapes is None or not shapes.overlap or not nightly:
        return []
    k, job = nightly[0]
    started = sorted({(r.start_ms, r.end_ms) for s in sims for r in s.runs if r.neighbour == k and r.started})
    out = []
    for kind in shapes.overlap:
        name = str(rng.choice(OVERLAP_NAMES[kind]))
        if kind == "weekly":
            if not started:
                continue
            a, b = started[int(rng.integers(0, len(started)))]
            at = datetime.fromtimestamp((a + int(rng.integers(1, max(2, (b - a) // 600_000))) * 300_000) / 1000, UTC)
            cron, duration = f"{at.minute} {at.hour} * * {(at.weekday() + 1) % 7}", int(rng.integers(20, 91))
        else:
            cron, duration = f"{int(rng.integers(0, 12)) * 5} * * * *", int(rng.integers(5, 21))
        length = duration * 60_000
        windows = tuple((t, t + length) for t in cron_starts(cron, scenario.start_ms - length + 1, scenario.end_ms))
        out.append(Decoy(name, job.hosts, windows, cron, duration, job.hosts_written, overlaps=job.job, cadence=kind))
    return out


def _is_daily(cron: str | None) -> bool:
    parts = (cron or "").split()
    return len(parts) == 5 and parts[0].isdigit() and parts[1].isdigit() and parts[2:] == ["*", "*", "*"]


def _overlaps(windows: tuple[tuple[int, int], ...], spans: list[tuple[int, int]]) -> bool:
    return any(a < d and c < b for a, b in windows for c, d in spans)


def _inside(ts: np.ndarray, windows: tuple[tuple[int, int], ...]) -> np.ndarray:
    mask = np.zeros(len(ts), dtype=bool)
    for a, b in windows:
        mask |= (ts >= a) & (ts < b)
    return mask


def decoy_counts(decoy: Decoy, sims: list[HostSim]) -> dict[str, float]:
    """Requests and OOMs inside the decoy's windows, and the OOMs its hosts' rates outside them predict."""
    requests = ooms = expected = 0.0
    for sim in sims:
        if sim.host.name not in decoy.hosts:
            continue
        inside = _inside(sim.req.ts, decoy.windows)
        failed = sim.cause != OK
        requests += int(inside.sum())
        ooms += int((inside & failed).sum())
        outside = int((~inside).sum())
        expected += int(inside.sum()) * int((failed & ~inside).sum()) / max(outside, 1)
    return {
        "requests_inside": int(requests),
        "ooms_inside": int(ooms),
        "ooms_expected_from_traffic": round(expected, 1),
    }
