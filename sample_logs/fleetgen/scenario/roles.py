"""Host roles in a randomised fleet: which host fragments, which never empties its cache, which writes only a
service text log. Only hosts that run no leaking version and whose thresholds are out of reach fragment or
grow their cache, so that those hosts have no other cause of OOMs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..grounding import GIB, MIB, SEGMENT, round_up
from ..plan import HOUR_MS
from ..traffic import Requests
from .load import token_sample
from .spec import Fragmentation, Host, Traffic, Version

PREFIX_CACHE = 4 * GIB  # the most a fragmenting host's flat prefix cache holds


def versions_on(host: Host) -> list[int]:
    """The versions a host runs at some point."""
    return sorted({v for _, v in host.deploys})


def assign_roles(
    rng: np.random.Generator,
    hosts: list[Host],
    versions: list[Version],
    traffic: Traffic,
    seed: int,
    non_pytorch: int,
    efficiency: float,
) -> list[Host]:
    """Which host fragments (45 % of fleets that have a host for it), which grows its cache (30 %), which
    writes a text log instead of a request log (35 %, in a pool with request logs too)."""
    sample = token_sample(traffic, seed)

    def quiet(h: Host) -> bool:
        return not any(versions[v].leak_per_request for v in versions_on(h)) and _out_of_reach(
            h, versions, traffic, non_pytorch, efficiency
        )

    out = {h.name: h for h in hosts}
    frag_ok = [h for h in hosts if quiet(h) and _largest_requests(h, versions, sample, 0.02) >= 16 * MIB]
    if frag_ok and rng.random() < 0.45:
        host = frag_ok[int(rng.integers(0, len(frag_ok)))]
        out[host.name] = replace(host, fragmentation=_fragmentation(rng, host, versions, sample))
    growth_ok = [h for h in hosts if quiet(h) and out[h.name].fragmentation is None]
    if growth_ok and rng.random() < 0.3:
        host = growth_ok[int(rng.integers(0, len(growth_ok)))]
        out[host.name] = replace(host, cache_growth_per_day=int(rng.uniform(1, 3) * GIB) // SEGMENT * SEGMENT)
    pools = [h.pool for h in hosts]
    text_ok = [h for h in out.values() if pools.count(h.pool) > 1 and h.fragmentation is None]
    text_ok = [h for h in text_ok if not h.cache_growth_per_day]
    if text_ok and rng.random() < 0.35:
        host = text_ok[int(rng.integers(0, len(text_ok)))]
        out[host.name] = replace(host, log="text")
    return [out[h.name] for h in hosts]


def _out_of_reach(host: Host, versions: list[Version], traffic: Traffic, non_pytorch: int, efficiency: float) -> bool:
    """No version on the host fails a request the scheduler lets through, even with a full prefix cache."""
    for vid in versions_on(host):
        mm = versions[vid].model.memory(non_pytorch, efficiency)
        base = mm.baseline_allocated + PREFIX_CACHE
        if mm.token_threshold(host.card.device_total, 0, base) < traffic.max_batched_tokens * 1.1:
            return False
    return True


def _largest_requests(host: Host, versions: list[Version], sample: Requests, share: float) -> int:
    """The size the largest `share` of the host's first version's allocations exceed."""
    per_token = versions[versions_on(host)[0]].model.intermediate * 2
    requested = round_up(sample.batch * sample.inp * per_token, SEGMENT)
    return int(np.quantile(requested, 1 - share))


def _fragmentation(rng: np.random.Generator, host: Host, versions: list[Version], sample: Requests) -> Fragmentation:
    """Pinned segments that leave a largest free block the largest 1-4 % of requests do not fit in."""
    median = _largest_requests(host, versions, sample, float(rng.uniform(0.01, 0.04)))
    free = max(SEGMENT, int(median * rng.uniform(0.3, 0.8)) // SEGMENT * SEGMENT)
    prefix = int(rng.uniform(1, 4) * GIB) // SEGMENT * SEGMENT
    return Fragmentation(HOUR_MS * int(rng.integers(2, 7)), free, median, prefix)
