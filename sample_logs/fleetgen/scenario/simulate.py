"""One host of a randomised fleet through the memory model, request by request: process lifetimes end at
deploys, at an operator's restart when OOMs pile up, or at a crash; neighbours start only when they fit."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..grounding import BLOCK, MIB, SEGMENT, MemoryModel, round_up
from ..simulate import CACHE_SLACK, CAPACITY, EXTERNAL, FRAGMENTATION, LEAK, OK
from ..traffic import Requests, latency_ms
from .load import arrivals, features
from .models import SPEED
from .spec import Host, Scenario

NEIGHBOUR_MARGIN = 64 * MIB  # a neighbour's process starts only if the device has this much to spare beside it
BYTES_NOISE = 0.004  # sd of the log-normal factor on each request's bytes per token: no log states it
# A failed request is at a cause's edge when its cause changes with its bytes moved two such sd either way
# (~95 % of requests' noise): the logs cannot tell which side of the edge it fell.
EDGE_SPREAD = 2 * BYTES_NOISE


@dataclass
class Lifetime:
    """One serving process."""

    start_ms: int
    version: int
    pid: int
    end_ms: int = 0
    end_reason: str = "end"  # "deploy", "operator", "crash" or "end" (still running when the data ends)
    requests: int = 0
    ooms: int = 0
    leaked: int = 0  # bytes the leak kept by the end
    first_leak_oom_ms: int | None = None


@dataclass
class Run:
    """One run of a neighbour's process on this host."""

    neighbour: int
    window: int
    start_ms: int
    end_ms: int
    bytes: int
    pid: int = 0
    started: bool = False


@dataclass
class HostSim:
    """Everything written about one host; arrays per kept request, `oom_*` per failed one."""

    host: Host
    req: Requests
    version: np.ndarray
    life: np.ndarray
    age: np.ndarray
    before: np.ndarray
    after: np.ndarray
    need: np.ndarray
    requested: np.ndarray
    other: np.ndarray
    run: np.ndarray  # index into `runs` of the neighbour running at each request, -1 for none
    cause: np.ndarray
    leak_too: np.ndarray
    lifetimes: list[Lifetime]
    runs: list[Run]
    # The cause of each failed request with its bytes EDGE_SPREAD smaller and larger (its own cause where it would
    # then fit or fail the same way); OK for requests that did not fail.
    cause_low: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    cause_high: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    latency: np.ndarray = field(default_factory=lambda: np.zeros(0))
    res_before: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    res_after: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    peak: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    oom_free: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    oom_allocated: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    oom_reserved: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def oom_rows(self) -> np.ndarray:
        return np.flatnonzero(self.cause > 0)


def memory(scenario: Scenario, vid: int) -> MemoryModel:
    return scenario.versions[vid].model.memory(scenario.non_pytorch, scenario.efficiency)


def base_bytes(scenario: Scenario, host: Host, vid: int) -> int:
    """Allocated at rest: weights and buffers, plus a fragmenting host's flat prefix cache."""
    prefix = host.fragmentation.prefix_cache if host.fragmentation else 0
    return memory(scenario, vid).baseline_allocated + prefix


def _runs(scenario: Scenario, host: Host) -> list[Run]:
    """The neighbour windows on this host, in time order."""
    runs = [
        Run(k, w, a, b, n.bytes)
        for k, n in enumerate(scenario.neighbours)
        if host.name in n.hosts
        for w, (a, b) in enumerate(n.windows)
    ]
    return sorted(runs, key=lambda r: r.start_ms)


class _State:
    """The loop's state: the process serving now, the leak it holds, the operator's pager, pids."""

    def __init__(self, scenario: Scenario, host: Host, rng: np.random.Generator) -> None:
        self.scenario, self.host, self.rng = scenario, host, rng
        self.pid = 900 + int(rng.integers(0, 600))
        self.lives: list[Lifetime] = []
        self.leaked = 0
        self.after = 0
        self.pending: int | None = None
        self.recent: deque[int] = deque()
        self.begin(scenario.start_ms, host.deploys[0][1])

    def next_pid(self) -> int:
        self.pid += int(self.rng.integers(40, 2400))
        return self.pid

    def begin(self, at_ms: int, vid: int) -> None:
        self.lives.append(Lifetime(at_ms, vid, self.next_pid()))
        self.leaked, self.pending = 0, None
        self.after = base_bytes(self.scenario, self.host, vid)
        self.recent.clear()

    def stop(self, at_ms: int, reason: str, downtime_ms: int, vid: int | None = None) -> None:
        life = self.lives[-1]
        life.end_ms, life.end_reason, life.leaked = at_ms, reason, self.leaked
        self.begin(at_ms + downtime_ms, life.version if vid is None else vid)

    def reserved_now(self, at_ms: int) -> int:
        """What the service holds at `at_ms` (nothing while it is down)."""
        if at_ms < self.lives[-1].start_ms:
            return 0
        return round_up(self.after + CACHE_SLACK, SEGMENT) + self.scenario.non_pytorch


def simulate_host(scenario: Scenario, idx: int) -> HostSim:
    """Draw and simulate host `idx`."""
    host = scenario.hosts[idx]
    rng = np.random.default_rng(np.random.SeedSequence([scenario.seed, idx, 1]))
    ts = arrivals(scenario.start_ms, scenario.end_ms, host.requests_per_day, scenario.traffic.peak_hour_utc, rng)
    req = features(ts, scenario.traffic, rng)
    noise = np.exp(rng.normal(0, BYTES_NOISE, len(ts)))  # bytes per token vary a little per request
    dep_t = np.array([t for t, _ in host.deploys], dtype=np.int64)
    dep_v = np.array([v for _, v in host.deploys], dtype=np.int64)
    planned = dep_v[np.searchsorted(dep_t, ts, side="right") - 1]
    vids = sorted(set(dep_v.tolist()))
    bpt = np.zeros(len(scenario.versions), dtype=np.int64)
    rppt = np.zeros(len(scenario.versions), dtype=np.int64)
    leak = np.zeros(len(scenario.versions), dtype=np.int64)
    for v in vids:
        bpt[v], rppt[v] = memory(scenario, v).bytes_per_token, memory(scenario, v).requested_per_prefill_token
        leak[v] = scenario.versions[v].leak_per_request
    need = (bpt[planned] * noise * req.tokens).astype(np.int64) // BLOCK * BLOCK
    need = np.maximum(need, leak[planned])
    requested = round_up(req.batch * req.inp * rppt[planned], SEGMENT)
    frag = host.fragmentation
    largest_free = np.exp(rng.normal(np.log(frag.largest_free_median), 0.35, len(ts))) if frag else np.zeros(len(ts))
    out = _loop(scenario, host, rng, req.ts, need, requested, largest_free, leak)
    keep, version, life, before, after, other, run, cause, leak_too, state, runs, edges = out
    req = req.take(keep)
    starts = np.array([lt.start_ms for lt in state.lives], dtype=np.int64)
    sim = HostSim(
        host,
        req,
        version,
        life,
        req.ts - starts[life],
        before,
        after,
        need[keep],
        requested[keep],
        other,
        run,
        cause,
        leak_too,
        state.lives,
        runs,
    )
    sim.cause_low, sim.cause_high = edges
    sim.latency = latency_ms(req, SPEED[host.card.key] >= 1.5, cause > 0, rng)
    _reserved(scenario, sim)
    _oom_state(scenario, sim, rng)
    return sim


def _loop(
    scenario: Scenario,
    host: Host,
    rng: np.random.Generator,
    ts: np.ndarray,
    need: np.ndarray,
    requested: np.ndarray,
    largest_free: np.ndarray,
    leak: np.ndarray,
):
    """Request by request: events due first (deploys, operator restarts, neighbour starts), then the request."""
    pol, card, frag = scenario.policy, host.card, host.fragmentation
    avail0 = card.device_total - scenario.non_pytorch
    state = _State(scenario, host, rng)
    runs, r, d = _runs(scenario, host), 0, 1
    active: Run | None = None
    n = len(ts)
    keep = np.zeros(n, dtype=bool)
    names = ("version", "life", "before", "after", "other", "run", "cause", "cause_low", "cause_high")
    cols = {k: np.zeros(n, dtype=np.int64) for k in names}
    leak_too = np.zeros(n, dtype=bool)
    bases = {v: base_bytes(scenario, host, v) for _, v in host.deploys}
    frag_full = frag_reserved(scenario, host) if frag else 0
    frag_free = avail0 - frag_full
    ts_l, need_l, req_l, free_l = ts.tolist(), need.tolist(), requested.tolist(), largest_free.tolist()

    def due(t: int) -> None:
        nonlocal r, d
        while True:
            deploy = host.deploys[d][0] if d < len(host.deploys) else None
            pending = state.pending
            start = runs[r].start_ms if r < len(runs) else None
            first = min(x for x in (deploy, pending, start, t + 1) if x is not None)
            if first > t:
                return
            if first == start:
                run = runs[r]
                run.pid = state.next_pid()
                held = state.reserved_now(first)
                run.started = held + run.bytes + NEIGHBOUR_MARGIN <= card.device_total
                r += 1
            elif first == deploy:
                state.stop(first, "deploy", pol.deploy_downtime_ms, host.deploys[d][1])
                d += 1
            else:
                state.stop(first, "operator", pol.restart_downtime_ms)

    for k in range(n):
        t = ts_l[k]
        due(t)
        life = state.lives[-1]
        if t < life.start_ms:
            continue
        keep[k] = True
        while active is not None and t >= active.end_ms:
            active = None
        for run in runs[:r]:
            if run.start_ms <= t < run.end_ms and run.started:
                active = run
        other = active.bytes if active is not None else 0
        v, base, nd = life.version, bases[life.version], need_l[k]
        before = base + state.leaked
        budgets = (scenario.efficiency * avail0, scenario.efficiency * (avail0 - other))
        # pinned segments can refuse the request only once warm, and only where no free block holds it
        pinned = (
            frag_full if frag and t - life.start_ms >= frag.warmup_ms and req_l[k] > max(free_l[k], frag_free) else 0
        )
        memory_now = (before, base, budgets, pinned, req_l[k])
        cause, leak_too[k] = _verdict(nd, *memory_now)
        if cause != OK:
            for key, factor in (("cause_low", 1 - EDGE_SPREAD), ("cause_high", 1 + EDGE_SPREAD)):
                moved = _verdict(int(nd * factor), *memory_now)[0]
                cols[key][k] = cause if moved == OK else moved
        after = before
        if cause == OK:
            state.leaked += int(leak[v])
            after = before + int(leak[v])
        state.after = after
        life.requests += 1
        for key, value in (("version", v), ("life", len(state.lives) - 1), ("before", before), ("after", after)):
            cols[key][k] = value
        cols["other"][k], cols["cause"][k] = other, cause
        cols["run"][k] = runs.index(active) if active is not None else -1
        if cause != OK:
            _failed(state, scenario, t, cause)
    due(scenario.end_ms - 1)
    state.lives[-1].end_ms, state.lives[-1].leaked = scenario.end_ms, state.leaked
    if state.lives[-1].start_ms >= scenario.end_ms:
        state.lives.pop()
    sel = {k: v[keep] for k, v in cols.items()}
    return (
        keep,
        sel["version"],
        sel["life"],
        sel["before"],
        sel["after"],
        sel["other"],
        sel["run"],
        sel["cause"].astype(np.int8),
        leak_too[keep],
        state,
        runs,
        (sel["cause_low"].astype(np.int8), sel["cause_high"].astype(np.int8)),
    )


def _verdict(
    need: int, before: int, base: int, budgets: tuple[float, float], pinned: int, requested: int
) -> tuple[int, bool]:
    """(cause, leak too) of a request needing `need` bytes on `before` allocated: OK if it fits the budget beside
    the neighbour (`budgets`: without it, beside it) and, on a fragmented cache (`pinned` bytes reserved in
    segments, 0 where none refuse it), fragmentation when the segments hold room for it in total, in no block."""
    budget_0, budget_o = budgets
    if before + need > budget_o:
        return _why(before, base, need, budget_0, budget_o)
    if pinned and pinned - before - need >= requested:
        return FRAGMENTATION, False
    return OK, False


def _why(before: int, base: int, need: int, budget_0: float, budget_o: float) -> tuple[int, bool]:
    """(cause, leak too) of a request that did not fit, by counterfactuals as in the sample fleet: capacity if
    it fails on a healthy baseline with no neighbour, the neighbour if it fails on a healthy baseline beside
    it, the leak if it fails without the neighbour, else the neighbour with the leak's help."""
    if base + need > budget_0:
        return CAPACITY, False
    if base + need > budget_o:
        return EXTERNAL, False
    if before + need > budget_0:
        return LEAK, False
    return EXTERNAL, True


def _failed(state: _State, scenario: Scenario, t: int, cause: int) -> None:
    """After an OOM: a crash-prone version dies now; otherwise the operator is paged once enough pile up."""
    pol, life = scenario.policy, state.lives[-1]
    life.ooms += 1
    if cause == LEAK and life.first_leak_oom_ms is None:
        life.first_leak_oom_ms = t
    if scenario.versions[life.version].crash_on_oom:
        state.stop(t + 500, "crash", pol.crash_downtime_ms)
        return
    state.recent.append(t)
    while state.recent and state.recent[0] < t - pol.operator_window_ms:
        state.recent.popleft()
    if state.pending is None and len(state.recent) >= pol.operator_ooms:
        state.pending = t + int(state.rng.integers(*pol.operator_delay_ms))


def frag_reserved(scenario: Scenario, host: Host) -> int:
    """Reserved once the host's segments are all pinned: all but `free_bytes` of the device."""
    assert host.fragmentation is not None
    avail = host.card.device_total - scenario.non_pytorch
    return (avail - host.fragmentation.free_bytes) // SEGMENT * SEGMENT


def _reserved(scenario: Scenario, sim: HostSim) -> None:
    """Reserved before and after each request, and the peak: empty_cache() after every request makes reserved
    follow allocated, except where it is off (the cache keeps its largest peak and creeps up) and where
    pinned segments cannot be returned."""
    host = sim.host
    starts = np.array([round_up(base_bytes(scenario, host, lt.version) + CACHE_SLACK, SEGMENT) for lt in sim.lifetimes])
    start_res = starts[sim.life] if len(sim.life) else np.zeros(0, dtype=np.int64)
    sim.peak = np.maximum(sim.before + sim.need, sim.after)
    res = round_up(sim.after + CACHE_SLACK, SEGMENT)
    avail = host.card.device_total - scenario.non_pytorch
    if host.cache_growth_per_day:
        creep = round_up((host.cache_growth_per_day * sim.age / 86_400_000).astype(np.int64), SEGMENT)
        grown = _cummax_by(round_up(sim.peak, SEGMENT), sim.life) + creep
        res = np.minimum(np.maximum(res, grown), avail // SEGMENT * SEGMENT - SEGMENT)
    if host.fragmentation:
        full = frag_reserved(scenario, host)
        share = np.minimum(1.0, sim.age / host.fragmentation.warmup_ms)
        res = np.maximum(res, (start_res + ((full - start_res) * share).astype(np.int64)) // SEGMENT * SEGMENT)
    first = np.r_[True, sim.life[1:] != sim.life[:-1]] if len(sim.life) else np.zeros(0, dtype=bool)
    sim.res_after = res
    sim.res_before = np.where(first, start_res, np.r_[start_res[:1], res[:-1]])


def _cummax_by(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Running maximum of `values` restarting at each new value of the sorted `groups`."""
    out = values.copy()
    for g in np.unique(groups):
        rows = groups == g
        out[rows] = np.maximum.accumulate(values[rows])
    return out


def _oom_state(scenario: Scenario, sim: HostSim, rng: np.random.Generator) -> None:
    """Free, allocated and reserved memory when each failed allocation was refused, so that the message holds:
    total = free + (reserved + non-PyTorch) + other processes. Only fragmentation leaves reserved-but-
    unallocated memory at least as large as the request."""
    rows = sim.oom_rows
    total, req, after = sim.host.card.device_total, sim.requested[rows], sim.after[rows]
    avail = total - scenario.non_pytorch - sim.other[rows]
    frac = avail % SEGMENT  # reserved is whole 2 MiB segments, so free has the device's odd remainder
    room = avail - after
    assert (room > frac + SEGMENT).all(), "a failing request must fit its own baseline"
    steps = (rng.uniform(0.05, 0.7, len(rows)) * (np.minimum(req, room) - frac)) // SEGMENT
    free = frac + np.maximum(steps, 0).astype(np.int64) * SEGMENT
    reserved = avail - free
    unalloc = (rng.uniform(0.1, 0.9, len(rows)) * (req - free - BLOCK)).astype(np.int64) // BLOCK * BLOCK
    allocated = np.maximum(reserved - np.maximum(unalloc, 0), after)
    frag = sim.cause[rows] == FRAGMENTATION
    if frag.any():
        reserved[frag] = frag_reserved(scenario, sim.host)
        free[frag] = avail[frag] - reserved[frag]
        inflight = (sim.need[rows][frag] * rng.uniform(0.3, 0.9, int(frag.sum()))).astype(np.int64) // BLOCK * BLOCK
        allocated[frag] = after[frag] + inflight
        assert (reserved[frag] - allocated[frag] >= req[frag]).all(), "fragmentation leaves the request's room"
    assert (free < req).all() and (allocated <= reserved).all() and (free >= 0).all()
    sim.oom_free, sim.oom_allocated, sim.oom_reserved = free, allocated, reserved
    sim.peak[rows] = allocated
