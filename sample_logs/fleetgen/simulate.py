"""One instance's requests through the memory model: what each one allocated, and which failed and why."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .grounding import BLOCK, GIB, MIB, SEGMENT, MemoryModel, round_up
from .lifetimes import Lifetimes, per_request, plan_lifetimes
from .plan import DAY_MS, HOUR_MS, WATCHDOG_FRACTION, FleetPlan, Instance
from .traffic import Requests, arrivals, features, latency_ms

CAUSES = ("ok", "capacity", "external_pressure", "leak", "fragmentation")
OK, CAPACITY, EXTERNAL, LEAK, FRAGMENTATION = range(5)
LEAK_PER_HOUR_A10 = 110 * MIB  # what v1.5 keeps per hour on an A10 at its average traffic
CACHE_SLACK = 18 * MIB  # small-pool and partly used segments that empty_cache() cannot return
CACHE_GROWTH_PER_DAY = 2 * GIB  # a100-04 never empties its cache: reserved creeps up
FRAG_WARMUP_MS = 6 * HOUR_MS  # a100-05's segments are all pinned by live blocks after this long
FRAG_FREE = 300 * MIB  # device memory left outside a100-05's pinned segments
FRAG_LARGEST_FREE_MEDIAN = 400 * MIB  # largest free block inside those segments (log-normal)


def _empty() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


@dataclass
class Simulated:
    """Everything written about one instance; arrays are per kept request, `oom_*` per failed one."""

    inst: Instance
    req: Requests
    lifetimes: Lifetimes
    life: np.ndarray  # lifetime index of each request
    age: np.ndarray  # ms since its process started
    version: np.ndarray
    before: np.ndarray  # allocated before: baseline plus what the leak kept so far
    after: np.ndarray
    other: np.ndarray = field(default_factory=_empty)  # bytes the backup held, per request
    cause: np.ndarray = field(default_factory=_empty)
    leak_too: np.ndarray = field(default_factory=_empty)  # external_pressure that needed the leak as well
    latency: np.ndarray = field(default_factory=_empty)
    res_before: np.ndarray = field(default_factory=_empty)
    res_after: np.ndarray = field(default_factory=_empty)
    peak: np.ndarray = field(default_factory=_empty)
    oom_requested: np.ndarray = field(default_factory=_empty)
    oom_free: np.ndarray = field(default_factory=_empty)
    oom_allocated: np.ndarray = field(default_factory=_empty)
    oom_reserved: np.ndarray = field(default_factory=_empty)

    @property
    def oom_rows(self) -> np.ndarray:
        """Indices of the failed requests."""
        return np.flatnonzero(self.cause > 0)


def leak_per_request(plan: FleetPlan) -> int:
    """Bytes the leaking version keeps per request, so that an A10 leaks LEAK_PER_HOUR_A10 at any scale."""
    a10 = next(i for i in plan.instances if i.card.key == "A10")
    per_hour = plan.expected_requests(a10) / (plan.weeks * 7 * 24)
    return round_up(int(LEAK_PER_HOUR_A10 / per_hour), BLOCK)


BackupBytes = Callable[[Instance, np.ndarray], np.ndarray]


def simulate(plan: FleetPlan, idx: int, model: MemoryModel, backup_bytes: BackupBytes) -> Simulated:
    """Draw and simulate instance `idx`; `backup_bytes(inst, ts)`: what the backup holds at each request."""
    rng = np.random.default_rng(np.random.SeedSequence([plan.seed, idx]))
    sim = _draw(plan, plan.instances[idx], model, rng)
    sim.other = backup_bytes(sim.inst, sim.req.ts)
    noise = np.exp(rng.normal(0, 0.004, len(sim.req.ts)))  # bytes per token vary a little per request
    need = (model.bytes_per_token * noise * sim.req.tokens).astype(np.int64) // BLOCK * BLOCK
    sim.cause, sim.leak_too = _causes(model, sim, need)
    requested = round_up(sim.req.batch * sim.req.inp * model.requested_per_prefill_token, SEGMENT)
    if sim.inst.fragmentation:
        _fragmentation(sim, requested, model, rng)
    sim.latency = latency_ms(sim.req, sim.inst.card.key == "A100", sim.cause > 0, rng)
    _reserved(sim, model, need)
    _oom_state(sim, model, need, requested, rng)
    return sim


def _draw(plan: FleetPlan, inst: Instance, model: MemoryModel, rng: np.random.Generator) -> Simulated:
    """Arrivals, process lifetimes (deploys, watchdog restarts) and the allocated baseline of each request."""
    ts = arrivals(plan, inst, rng)
    names = [v.name for v in plan.versions]
    deploys = [(t, names.index(v)) for t, v in plan.deploys(inst)]
    leaks = [leak_per_request(plan) if v.leaks else 0 for v in plan.versions]
    base = model.baseline_allocated + inst.prefix_cache
    lt = plan_lifetimes(ts, deploys, leaks, base, int(WATCHDOG_FRACTION * inst.card.device_total))
    req = features(ts, rng).take(lt.keep)
    life, pos = per_request(lt, len(req.ts))
    version = np.array(lt.version, dtype=np.int64)[life]
    leak = np.array(leaks, dtype=np.int64)[version]
    age = req.ts - np.array(lt.starts_ms, dtype=np.int64)[life]
    before = base + pos * leak
    return Simulated(inst, req, lt, life, age, version, before, before + leak)


def _causes(model: MemoryModel, sim: Simulated, need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cause of each failure: capacity if it fails on a healthy, uncrowded card; else the backup if it
    fails on a healthy baseline beside it; else the leak if it fails without the backup; else both."""
    total, before, other = sim.inst.card.device_total, sim.before, sim.other
    healthy = model.baseline_allocated + sim.inst.prefix_cache + need
    capacity = healthy > model.budget(total)
    fails = before + need > model.budget(total, other)
    beside_backup = healthy > model.budget(total, other)
    leak_alone = before + need > model.budget(total)
    cause = np.zeros(len(need), dtype=np.int8)
    cause[fails & ~capacity & ~leak_alone] = EXTERNAL
    cause[fails & ~capacity & leak_alone & ~beside_backup] = LEAK
    cause[fails & ~capacity & beside_backup] = EXTERNAL
    cause[fails & capacity] = CAPACITY
    leak_too = fails & ~capacity & ~leak_alone & ~beside_backup
    return cause, leak_too


def _fragmentation(sim: Simulated, requested: np.ndarray, model: MemoryModel, rng: np.random.Generator) -> None:
    """Once every segment holds a live block, a request larger than the largest free block (and than
    the little device memory left) fails although reserved-but-unallocated memory is far larger."""
    largest_free = np.exp(rng.normal(np.log(FRAG_LARGEST_FREE_MEDIAN), 0.35, len(sim.cause)))
    device_free = sim.inst.card.device_total - model.non_pytorch - _frag_reserved(sim.inst, model)
    warm = sim.age >= FRAG_WARMUP_MS
    sim.cause[(sim.cause == OK) & warm & (requested > np.maximum(largest_free, device_free))] = FRAGMENTATION


def _frag_reserved(inst: Instance, model: MemoryModel) -> int:
    """What a100-05 keeps reserved once its cache is fragmented: all but FRAG_FREE of the device."""
    return (inst.card.device_total - model.non_pytorch - FRAG_FREE) // SEGMENT * SEGMENT


def _reserved(sim: Simulated, model: MemoryModel, need: np.ndarray) -> None:
    """Reserved memory before and after each request, and the peak.

    The service calls torch.cuda.empty_cache() after every request, so reserved follows allocated;
    a100-04 has that switched off (its cache grows), and a100-05 cannot return its pinned segments."""
    sim.peak = np.maximum(sim.before + need, sim.after)
    start_res = round_up(model.baseline_allocated + sim.inst.prefix_cache + CACHE_SLACK, SEGMENT)
    res = round_up(sim.after + CACHE_SLACK, SEGMENT)
    if sim.inst.cache_growth:  # it keeps its largest peak cached, and split blocks make the cache creep on
        creep = round_up((CACHE_GROWTH_PER_DAY * sim.age / DAY_MS).astype(np.int64), SEGMENT)
        res = _cummax_by(round_up(sim.peak, SEGMENT), sim.life) + creep
    if sim.inst.fragmentation:
        full = _frag_reserved(sim.inst, model)
        level = start_res + ((full - start_res) * np.minimum(1.0, sim.age / FRAG_WARMUP_MS)).astype(np.int64)
        res = np.maximum(res, level // SEGMENT * SEGMENT)
    first = np.r_[True, sim.life[1:] != sim.life[:-1]]
    sim.res_after = res
    sim.res_before = np.where(first, start_res, np.r_[start_res, res[:-1]])


def _cummax_by(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Running maximum of `values` restarting at each new value of the sorted `groups`."""
    out = values.copy()
    for g in np.unique(groups):
        rows = groups == g
        out[rows] = np.maximum.accumulate(values[rows])
    return out


def _oom_state(
    sim: Simulated, model: MemoryModel, need: np.ndarray, requested: np.ndarray, rng: np.random.Generator
) -> None:
    """Free, allocated and reserved memory at the moment each failed allocation was refused.

    They satisfy what the message says: total = free + (reserved + non-PyTorch) + other processes."""
    rows = sim.oom_rows
    total, req, after = sim.inst.card.device_total, requested[rows], sim.after[rows]
    avail = total - model.non_pytorch - sim.other[rows]
    frac = avail % SEGMENT  # reserved is whole 2 MiB segments, so free has the device's odd remainder
    room = avail - after
    assert (room > frac + SEGMENT).all(), "a failing request must fit its own baseline"
    steps = (rng.uniform(0.05, 0.7, len(rows)) * (np.minimum(req, room) - frac)) // SEGMENT
    free = frac + np.maximum(steps, 0).astype(np.int64) * SEGMENT
    reserved = avail - free
    unalloc = (rng.uniform(0.1, 0.9, len(rows)) * (req - free - BLOCK)).astype(np.int64) // BLOCK * BLOCK
    allocated = np.maximum(reserved - unalloc, after)
    frag = sim.cause[rows] == FRAGMENTATION
    if frag.any():
        reserved[frag] = _frag_reserved(sim.inst, model)
        free[frag] = total - model.non_pytorch - reserved[frag]
        inflight = (need[rows][frag] * rng.uniform(0.3, 0.9, int(frag.sum()))).astype(np.int64) // BLOCK * BLOCK
        allocated[frag] = after[frag] + inflight
    assert (free < req).all() and (allocated <= reserved).all()
    sim.oom_requested, sim.oom_free, sim.oom_allocated, sim.oom_reserved = req, free, allocated, reserved
    sim.peak[rows] = allocated
