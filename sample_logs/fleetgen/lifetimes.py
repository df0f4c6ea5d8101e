"""Process lifetimes of one instance: restarts at deploys, and watchdog restarts when a leak fills memory."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .plan import DEPLOY_DOWNTIME_MS, WATCHDOG_DOWNTIME_MS


@dataclass(frozen=True)
class Restart:
    """A process stop: a deploy of `version`, or the watchdog (with the allocated bytes that tripped it)."""

    ts_ms: int
    reason: str  # "deploy" or "watchdog"
    version: int  # index into plan.versions: the version deployed, or the one that was running
    allocated_after: int = 0


@dataclass
class Lifetimes:
    """Which requests survive, which process served each, and every restart."""

    keep: np.ndarray  # over the arrivals: False for requests that came while the service was down
    starts_ms: list[int] = field(default_factory=list)  # when each process began serving
    first: list[int] = field(default_factory=list)  # index (into kept requests) of its first request
    version: list[int] = field(default_factory=list)  # index into plan.versions
    restarts: list[Restart] = field(default_factory=list)


def plan_lifetimes(
    ts: np.ndarray, deploys: list[tuple[int, int]], leak: list[int], baseline: int, watchdog: int
) -> Lifetimes:
    """Lifetimes over sorted arrivals `ts`: `deploys` are (time, version index) (the first at the start),
    `leak[v]` the bytes version v keeps per request; a process is restarted once its allocated memory
    after a request reaches `watchdog` bytes."""
    keep = np.ones(len(ts), dtype=bool)
    out = Lifetimes(keep)
    bounds = [t for t, _ in deploys[1:]] + [int(ts[-1]) + 1 if len(ts) else 0]
    for (deploy_ms, ver), span_end_ms in zip(deploys, bounds, strict=True):
        begin = deploy_ms if not out.starts_ms else deploy_ms + DEPLOY_DOWNTIME_MS
        keep[(ts >= deploy_ms) & (ts < begin)] = False
        if out.starts_ms:
            out.restarts.append(Restart(deploy_ms, "deploy", ver))
        _serve(ts, out, begin, span_end_ms, ver, leak[ver], baseline, watchdog)
    _index_kept(out)
    return out


def _serve(
    ts: np.ndarray, out: Lifetimes, begin: int, end: int, ver: int, leak: int, baseline: int, watchdog: int
) -> None:
    """Lifetimes of one deployed version from `begin` to `end`, cut by watchdog restarts."""
    while begin < end:
        out.starts_ms.append(begin)
        out.version.append(ver)
        out.first.append(int(np.searchsorted(ts, begin)))  # an index over all arrivals for now
        if leak <= 0:
            return
        served = -(-(watchdog - baseline) // leak)  # requests until allocated-after reaches the watchdog
        last = out.first[-1] + served - 1
        if last >= len(ts) or ts[last] >= end:
            return
        restart = int(ts[last]) + 2_000  # the watchdog checks every 2 s
        out.restarts.append(Restart(restart, "watchdog", ver, baseline + served * leak))
        begin = restart + WATCHDOG_DOWNTIME_MS
        out.keep[(ts > ts[last]) & (ts < begin)] = False


def _index_kept(out: Lifetimes) -> None:
    """Turn each lifetime's first index over all arrivals into one over the kept requests."""
    kept_before = np.concatenate([[0], np.cumsum(out.keep)])
    out.first = [int(kept_before[i]) for i in out.first]


def per_request(out: Lifetimes, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(lifetime index, position within its lifetime) of each of the `n` kept requests."""
    firsts = np.array(out.first, dtype=np.int64)
    life = np.searchsorted(firsts, np.arange(n), side="right") - 1  # an empty lifetime is skipped over
    return life, np.arange(n) - firsts[life]
