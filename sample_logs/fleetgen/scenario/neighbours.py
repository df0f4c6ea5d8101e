"""Neighbour processes (external pressure): scheduled jobs that start a process holding X GiB on their hosts,
and a process someone started by hand with no calendar entry; host selectors as calendars write them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from zoneinfo import ZoneInfo

import numpy as np

from ..grounding import MIB
from ..plan import DAY_MS, HOUR_MS
from ..schedule import cron_starts
from .load import token_sample
from .spec import Host, Neighbour, Scenario

JOB_NAMES = ("nightly-backup", "reindex", "feature-backfill", "finetune-lora", "embed-refresh", "batch-eval")
PROCESSES = (
    "/opt/backup/bin/vecstore-backup",
    "python3 /jobs/reindex.py",
    "/usr/local/bin/feature-backfill",
    "python3 -m trainer.finetune",
    "/opt/etl/bin/embed-batch",
    "python3 eval_harness.py",
)
BY_HAND = ("python3 /home/dev/notebook_kernel.py", "python3 profile_run.py", "/usr/bin/python3 -m jupyter_kernel")
MIN_PRESSURE = 512 * MIB


def draw_neighbours(rng: np.random.Generator, scenario: Scenario) -> Scenario:
    """Up to two pressure jobs on disjoint hosts, and sometimes a process started by hand on another host."""
    sample = token_sample(scenario.traffic, scenario.seed).tokens
    used: set[str] = set()
    out = []
    names = [str(n) for n in rng.permutation(JOB_NAMES)]
    for k in range(int(rng.choice([0, 1, 2], p=[0.25, 0.55, 0.2]))):
        picked = select_hosts(rng, scenario, lambda h: _free(h, used))
        if picked is None:
            break
        written, hosts = picked
        cron, duration, windows = draw_schedule(rng, scenario)
        held = _pressure(rng, scenario, hosts, sample)
        if held is None or len(windows) < 2:
            continue
        process = PROCESSES[JOB_NAMES.index(names[k])]
        out.append(Neighbour(names[k], process, held, hosts, windows, cron, duration, written))
        used.update(hosts)
    spare = [h for h in scenario.hosts if _free(h, used)]
    if spare and rng.random() < 0.3:
        host = spare[int(rng.integers(0, len(spare)))]
        held = _pressure(rng, scenario, (host.name,), sample)
        if held is not None:
            windows = _spans(rng, scenario, int(rng.integers(1, 4)), (60, 300))
            out.append(Neighbour(None, str(rng.choice(BY_HAND)), held, (host.name,), windows, hosts_written=host.name))
    return replace(scenario, neighbours=tuple(out))


def nightly_job(rng: np.random.Generator, scenario: Scenario) -> Scenario:
    """A scheduled neighbour that runs every night (shape `overlap`: decoys are placed over its runs): the first
    job is moved to a nightly schedule, or one is added on free hosts; unchanged when no host has room."""
    jobs = [k for k, n in enumerate(scenario.neighbours) if n.job]
    cron, duration, windows = _nightly(rng, scenario)
    out = list(scenario.neighbours)
    if jobs:
        out[jobs[0]] = replace(out[jobs[0]], cron=cron, duration_min=duration, windows=windows)
        return replace(scenario, neighbours=tuple(out))
    used = {h for n in scenario.neighbours for h in n.hosts}
    picked = select_hosts(rng, scenario, lambda h: _free(h, used))
    if picked is None:
        return scenario
    written, hosts = picked
    held = _pressure(rng, scenario, hosts, token_sample(scenario.traffic, scenario.seed).tokens)
    if held is None:
        return scenario
    name = next(str(n) for n in rng.permutation(JOB_NAMES) if n not in {x.job for x in out})
    process = PROCESSES[JOB_NAMES.index(name)]
    out.insert(0, Neighbour(name, process, held, hosts, windows, cron, duration, written))
    return replace(scenario, neighbours=tuple(out))


def _nightly(rng: np.random.Generator, scenario: Scenario) -> tuple[str, int, tuple[tuple[int, int], ...]]:
    """A daily cron (UTC) starting between 00:00 and 04:59 local time, 60-240 minutes long, and its runs."""
    zone = ZoneInfo(scenario.tz)
    local = datetime.fromtimestamp(scenario.start_ms / 1000, zone).replace(
        hour=int(rng.integers(0, 5)), minute=int(rng.choice([0, 15, 30, 45]))
    )
    utc = local.astimezone(UTC)
    cron, duration = f"{utc.minute} {utc.hour} * * *", int(rng.integers(60, 241))
    length = duration * 60_000
    start, end = scenario.start_ms, scenario.end_ms
    return cron, duration, tuple((t, t + length) for t in cron_starts(cron, start - length + 1, end))


def _free(host: Host, used: set[str]) -> bool:
    return host.fragmentation is None and not host.cache_growth_per_day and host.name not in used


def expand_hosts(scenario: Scenario, written: str) -> tuple[str, ...]:
    """The hosts a selector names: `*`, a glob (`infer-b-*`, `a10-0[1-3]`) or a `;` list."""
    parts = written.split(";")
    return tuple(h.name for h in scenario.hosts if any(fnmatchcase(h.name, p) for p in parts))


def select_hosts(rng: np.random.Generator, scenario: Scenario, ok) -> tuple[str, tuple[str, ...]] | None:
    """(selector as written, hosts): a whole pool's glob, a bracket range, a list, or every host."""
    pools = sorted({h.pool for h in scenario.hosts if ok(h)})
    if not pools:
        return None
    if all(ok(h) for h in scenario.hosts) and len(pools) > 1 and rng.random() < 0.2:
        return "*", expand_hosts(scenario, "*")
    pool = pools[int(rng.integers(0, len(pools)))]
    prefix = scenario.pool_prefixes[pool]
    members = [h for h in scenario.hosts if h.pool == pool]
    index = [int(h.name[len(prefix) :]) for h in members]
    kind = str(rng.choice(["glob", "range", "list"]))
    if kind == "glob":
        written = f"{prefix}*"
    elif kind == "range" and len(members) > 1:
        a = int(rng.integers(0, len(members) - 1))
        b = int(rng.integers(a + 1, len(members)))
        digits = "0" if scenario.naming == "card" else ""
        written = f"{prefix}{digits}[{index[a]}-{index[b]}]"
    else:
        chosen = sorted(rng.choice(len(members), int(rng.integers(1, len(members) + 1)), replace=False))
        written = ";".join(members[i].name for i in chosen)
    hosts = expand_hosts(scenario, written)
    if not all(ok(scenario.host(h)) for h in hosts):
        hosts = tuple(h.name for h in members if ok(h))
        written = ";".join(hosts)
    return written, hosts


def draw_schedule(rng: np.random.Generator, scenario: Scenario) -> tuple[str | None, int, tuple[tuple[int, int], ...]]:
    """(cron in UTC or None, duration in minutes, windows): daily, on listed weekdays, every few hours, or
    explicit occurrences (those inside the data)."""
    start, end = scenario.start_ms, scenario.end_ms
    kind = str(rng.choice(["daily", "weekdays", "every", "occurrences"]))
    minute, hour = int(rng.choice([0, 5, 15, 30, 45])), int(rng.integers(0, 24))
    if kind == "occurrences":
        duration = int(rng.integers(30, 181))
        return None, duration, _spans(rng, scenario, int(rng.integers(2, 5)), (duration, duration))
    if kind == "every":
        step = int(rng.choice([6, 8, 12]))
        cron, duration = f"{minute} {hour % step}-23/{step} * * *", int(rng.integers(20, 91))
    elif kind == "weekdays":
        cron, duration = f"{minute} {hour} * * {_weekdays(rng, start, end)}", int(rng.integers(30, 151))
    else:
        cron, duration = f"{minute} {hour} * * *", int(rng.integers(30, 151))
    # every run that overlaps the data, as oomlab expands the rule: one may have started before the first request
    length = duration * 60_000
    return cron, duration, tuple((t, t + length) for t in cron_starts(cron, start - length + 1, end))


def _weekdays(rng: np.random.Generator, start: int, end: int) -> str:
    """A cron day-of-week list (0 = Sunday) holding at least two of the data's UTC days: `1,3,5` or `2-4`."""
    days = sorted({(datetime.fromtimestamp(t / 1000, UTC).weekday() + 1) % 7 for t in range(start, end, DAY_MS)})
    days += [(days[-1] + 1) % 7] if len(days) < 2 else []
    chosen = set(rng.choice(days, 2, replace=False).tolist())
    chosen |= {int(d) for d in rng.choice(7, int(rng.integers(0, 3)), replace=False)}
    ordered = sorted(chosen)
    if len(ordered) >= 3 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(map(str, ordered))


def _spans(
    rng: np.random.Generator, scenario: Scenario, count: int, minutes: tuple[int, int]
) -> tuple[tuple[int, int], ...]:
    """`count` disjoint windows of `minutes` (low, high) inside the data, at whole minutes, sorted."""
    out: list[tuple[int, int]] = []
    for _ in range(50 * count):
        if len(out) == count:
            break
        length = int(rng.integers(minutes[0], minutes[1] + 1)) * 60_000
        begin = (
            scenario.start_ms + int(rng.integers(0, (scenario.end_ms - scenario.start_ms - length) // 60_000)) * 60_000
        )
        if all(begin + length + HOUR_MS <= a or begin >= b + HOUR_MS for a, b in out):
            out.append((begin, begin + length))
    return tuple(sorted(out))


def _pressure(rng: np.random.Generator, scenario: Scenario, hosts: tuple[str, ...], tokens: np.ndarray) -> int | None:
    """Bytes the neighbour holds: enough that 4-20 % of its first host's requests no longer fit beside it,
    never so much that its hosts' median request fails; None when that leaves under 512 MiB."""
    first = scenario.host(hosts[0])
    avail = first.card.device_total - scenario.non_pytorch
    mm = _memory(scenario, first, first.deploys[0][1])
    beside = float(np.quantile(tokens, 1 - rng.uniform(0.04, 0.2)))
    held = avail - (mm.baseline_allocated + beside * mm.bytes_per_token) / mm.efficiency
    median = float(np.median(tokens))
    for name in hosts:
        host = scenario.host(name)
        for _, vid in host.deploys:
            m = _memory(scenario, host, vid)
            room = (
                host.card.device_total
                - m.non_pytorch
                - (m.baseline_allocated + median * m.bytes_per_token) / m.efficiency
            )
            held = min(held, room - 256 * MIB)
    return None if held < MIN_PRESSURE else int(held) // MIB * MIB


def _memory(scenario: Scenario, host: Host, vid: int):
    return scenario.versions[vid].model.memory(scenario.non_pytorch, scenario.efficiency)
