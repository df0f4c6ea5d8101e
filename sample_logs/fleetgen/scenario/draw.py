"""Draw a randomised scenario from a seed: cards, pools and their models, versions and rollouts, the leaking
version, traffic, time zone and restart policy. roles.py picks the fragmenting, cache-growing and text-log
hosts, neighbours.py the neighbour processes; decoys are placed after the simulation (decoys.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np

from ..grounding import BLOCK, GIB, MIB, SEGMENT, round_up
from ..plan import DAY_MS, Card
from .load import token_sample
from .models import CARDS, GB, SPEED, WIDE_CARDS, Model, architecture
from .neighbours import draw_neighbours, nightly_job
from .roles import assign_roles, versions_on
from .shapes import Shapes
from .spec import Host, Policy, Scenario, Traffic, Version

ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "America/Los_Angeles",
    "Asia/Kolkata",
    "Asia/Shanghai",
    "Asia/Tokyo",
    "Australia/Sydney",
    "America/Sao_Paulo",
)
FAMILIES = ("assist", "chat", "coder", "search", "summarize", "translate", "agent", "support")
MIN_TOKENS = 4096  # every version serves at least this many batch x tokens on each of its cards
MAX_FAILING_SHARE = 0.04  # no operator runs a card where more requests than this fail on a healthy baseline
THRESHOLD_SHARE = (0.002, 0.03)  # a planted threshold fails this share of the requests on its card
MAX_REQUESTS = 60_000  # the whole fleet: ingest and findings stay around 10-20 s on two cores
LEAK_PER_HOUR = (10 * MIB, 2 * GIB)


def draw(seed: int, traffic_scale: float = 1.0, shapes: Shapes | None = None) -> Scenario:
    """The scenario of `seed`: the same seed always gives the same scenario. `traffic_scale` shrinks or grows
    every host's traffic (tests use small fleets); leak rates per hour stay what they were drawn. `shapes`
    (shapes.py) widens it; None draws the classic fleet, the same random numbers in the same order."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2026]))
    days = int(rng.choice([2, 3]))
    tz, style = _zone(rng)
    start_ms = _start(rng, tz, days)
    end_ms = start_ms + days * DAY_MS
    peak_local = round(float(rng.uniform(0, 24)), 2)
    offset_h = datetime.fromtimestamp(start_ms / 1000, ZoneInfo(tz)).utcoffset().total_seconds() / 3600
    # a process in a PID namespace prints its own CUDA context in its message: 300-900 MiB, as real ones show
    context = (300, 900) if shapes is not None and shapes.pid_namespace else (500, 1000)
    non_pytorch = round_up(int(rng.uniform(*context) * MIB), SEGMENT)
    efficiency = round(float(rng.uniform(0.8, 0.85)), 3)
    cards = CARDS if shapes is None or not shapes.cards else tuple(sorted(CARDS + WIDE_CARDS, key=_total))
    traffic, pools, families = _hardware(rng, seed, non_pytorch, efficiency, (peak_local - offset_h) % 24, cards)
    naming = str(rng.choice(["card", "pool"]))
    prefixes = _prefixes(rng, naming, pools, shapes is not None and shapes.kube is not None)
    versions = _versions(rng, families)
    hosts = _hosts(rng, pools, prefixes, naming, versions, families, start_ms, end_ms, days, traffic_scale)
    versions = _leak(rng, versions, hosts)
    hosts = assign_roles(rng, hosts, versions, traffic, seed, non_pytorch, efficiency)
    scenario = Scenario(
        seed=seed,
        start_ms=start_ms,
        end_ms=end_ms,
        tz=tz,
        style=style,
        peak_hour_local=peak_local,
        naming=naming,
        hosts=tuple(hosts),
        versions=tuple(versions),
        traffic=traffic,
        policy=_policy(rng),
        non_pytorch=non_pytorch,
        efficiency=efficiency,
        pool_prefixes=tuple(prefixes),
        shapes=shapes,
    )
    scenario = draw_neighbours(rng, scenario)
    if shapes is not None and shapes.overlap:  # the overlapping decoys need a nightly job to overlap
        scenario = nightly_job(np.random.default_rng(np.random.SeedSequence([seed, 2027, 2])), scenario)
    return scenario


def _total(card: Card) -> int:
    return card.device_total


def _zone(rng: np.random.Generator) -> tuple[str, str]:
    """The fleet's time zone and how its logs write times."""
    tz = str(rng.choice(ZONES))
    if tz == "UTC":
        return tz, str(rng.choice(["utc_z", "naive_utc"]))
    return tz, str(rng.choice(["naive_local", "offset", "utc_z"]))


def _start(rng: np.random.Generator, tz: str, days: int) -> int:
    """Local midnight of a day in 2026 with no daylight-saving change in the next `days` days."""
    zone = ZoneInfo(tz)
    day = datetime(2026, 1, 5) + timedelta(days=int(rng.integers(0, 330)))
    while True:
        start = day.replace(tzinfo=zone)
        end = (day + timedelta(days=days + 1)).replace(tzinfo=zone)
        if start.utcoffset() == end.utcoffset():
            return int(start.astimezone(UTC).timestamp() * 1000)
        day += timedelta(days=7)


def _policy(rng: np.random.Generator) -> Policy:
    return Policy(
        operator_ooms=int(rng.integers(6, 16)),
        operator_window_ms=30 * 60_000,
        operator_delay_ms=(int(rng.integers(3, 10)) * 60_000, int(rng.integers(15, 45)) * 60_000),
        restart_downtime_ms=int(rng.integers(60, 180)) * 1000,
        crash_downtime_ms=int(rng.integers(20, 90)) * 1000,
    )


def _traffic(rng: np.random.Generator, peak_utc: float) -> Traffic:
    return Traffic(
        peak_hour_utc=round(peak_utc, 3),
        batch_p=tuple(float(p) for p in rng.dirichlet([3.8, 2.6, 1.8, 1.2, 0.6])),
        prompt_median=round(math.exp(rng.uniform(math.log(150), math.log(2500))), 1),
        prompt_sigma=round(float(rng.uniform(0.8, 1.1)), 3),
        output_median=round(math.exp(rng.uniform(math.log(60), math.log(400))), 1),
        max_prompt=int(rng.choice([8192, 16384, 32768])),
        max_batched_tokens=int(rng.choice([16384, 32768, 65536, 131072])),
    )


def _family(rng: np.random.Generator, cards: list[Card]) -> list[Model]:
    """The models of one family's versions: the first drawn to fit its smallest card, later ones the same,
    quantised to int8 (or back to bf16), or a build with heavier activations."""
    smallest = min(c.device_total for c in cards) / GB
    dtype = "int8" if rng.random() < 0.3 else "bf16"
    gb = math.exp(rng.uniform(math.log(0.3), math.log(min(70.0, 0.6 * smallest))))
    first = architecture(gb, dtype)
    models = [first]
    for _ in range(int(rng.choice([0, 1, 2], p=[0.3, 0.45, 0.25]))):
        prev, roll = models[-1], rng.random()
        if roll < 0.25:
            models.append(Model("int8" if prev.dtype == "bf16" else "bf16", *_shape(prev)))
        elif roll < 0.45:
            models.append(Model(prev.dtype, *_shape(prev), act_factor=round(float(rng.uniform(1.3, 2.0)), 2)))
        else:
            models.append(prev)
    return models


def _shape(model: Model) -> tuple[int, int, int, int, int]:
    return model.params, model.hidden, model.layers, model.kv_dim, model.intermediate


def _hardware(
    rng: np.random.Generator,
    seed: int,
    non_pytorch: int,
    efficiency: float,
    peak_utc: float,
    card_list: tuple[Card, ...] = CARDS,
) -> tuple[Traffic, list[tuple[Card, int, int]], list[list[Model]]]:
    """Cards, pools (card, family, size), each family's models and the traffic, drawn until every version fits
    its cards and (most of the time) one card and version has a threshold that some requests exceed."""
    want_threshold = rng.random() < 0.85
    for _ in range(400):
        count = int(rng.choice([1, 2, 3], p=[0.25, 0.45, 0.3]))
        cards = [card_list[i] for i in sorted(rng.choice(len(card_list), count, replace=False))]
        fam_of = [0] * len(cards)
        if len(cards) > 1 and rng.random() < 0.6:
            fam_of = [0, *(int(x) for x in rng.integers(0, 2, len(cards) - 1))]
            fam_of[-1] = 1 if max(fam_of) == 0 else fam_of[-1]
        families = [
            _family(rng, [c for c, f in zip(cards, fam_of, strict=True) if f == k]) for k in range(max(fam_of) + 1)
        ]
        traffic = _traffic(rng, peak_utc)
        shares = _failing_shares(cards, fam_of, families, traffic, seed, non_pytorch, efficiency)
        if shares is None or max(shares) > MAX_FAILING_SHARE:
            continue
        if want_threshold and not any(THRESHOLD_SHARE[0] <= s <= THRESHOLD_SHARE[1] for s in shares):
            continue
        sizes = [int(rng.integers(1, 4)) for _ in cards]
        while sum(sizes) < 3:
            sizes[int(rng.integers(0, len(sizes)))] += 1
        return traffic, [(c, f, n) for c, f, n in zip(cards, fam_of, sizes, strict=True)], families
    raise RuntimeError(f"seed {seed}: no fleet fits its cards")


def _failing_shares(
    cards: list[Card],
    fam_of: list[int],
    families: list[list[Model]],
    traffic: Traffic,
    seed: int,
    non_pytorch: int,
    efficiency: float,
) -> list[float] | None:
    """Share of requests above the threshold of every card and version; None if a version does not fit."""
    tokens = token_sample(traffic, seed).tokens
    shares = []
    for card, fam in zip(cards, fam_of, strict=True):
        for model in families[fam]:
            n = model.memory(non_pytorch, efficiency).token_threshold(card.device_total)
            if n < MIN_TOKENS:
                return None
            shares.append(float((tokens > n).mean()))
    return shares


def _prefixes(
    rng: np.random.Generator, naming: str, pools: list[tuple[Card, int, int]], nodes: bool = False
) -> list[str]:
    """Host name prefixes per pool: `a10-` (hosts a10-01, ...) or `infer-b-` (infer-b-1, ...); Kubernetes
    nodes `gpu-a10-` (gpu-a10-01) or `node-b-` (node-b-1)."""
    if naming == "card":
        return [f"gpu-{card.key}-" if nodes else f"{card.key}-" for card, _, _ in pools]
    first = int(rng.integers(0, 5))
    return [f"{'node' if nodes else 'infer'}-{'abcdefgh'[first + i]}-" for i in range(len(pools))]


def host_name(prefix: str, naming: str, index: int) -> str:
    return f"{prefix}{index:02d}" if naming == "card" else f"{prefix}{index}"


def _versions(rng: np.random.Generator, families: list[list[Model]]) -> list[Version]:
    """Names like `coder-7b-v2.1` and `coder-7b-int8-v2.2`, family by family."""
    names = rng.choice(FAMILIES, len(families), replace=False)
    out = []
    for name, models in zip(names, families, strict=True):
        major, minor = int(rng.integers(1, 4)), int(rng.integers(0, 5))
        for k, model in enumerate(models):
            dtype = "-int8" if model.dtype == "int8" else ""
            out.append(Version(f"{name}-{model.size_label}{dtype}-v{major}.{minor + k}", str(name), model))
    return out


def _hosts(
    rng: np.random.Generator,
    pools: list[tuple[Card, int, int]],
    prefixes: list[str],
    naming: str,
    versions: list[Version],
    families: list[list[Model]],
    start_ms: int,
    end_ms: int,
    days: int,
    traffic_scale: float,
) -> list[Host]:
    """Every host with its traffic and its deploys: version 0 at the start, later ones rolled out."""
    family_names = list(dict.fromkeys(v.family for v in versions))
    per_day = float(rng.uniform(2500, 4500))
    total = sum(per_day * SPEED[card.key] * n * days for card, _, n in pools)
    per_day *= min(1.0, MAX_REQUESTS / total) * traffic_scale
    hosts = []
    for pool, ((card, _, n), prefix) in enumerate(zip(pools, prefixes, strict=True)):
        for i in range(1, n + 1):
            rate = round(per_day * SPEED[card.key] * float(rng.uniform(0.85, 1.15)), 1)
            hosts.append(Host(host_name(prefix, naming, i), card, pool, "requests", rate, ()))
    span = end_ms - start_ms
    deploys: dict[str, list[tuple[int, int]]] = {h.name: [] for h in hosts}
    for fam in range(len(families)):
        mine = [h.name for h in hosts if pools[h.pool][1] == fam]
        ids = [i for i, v in enumerate(versions) if v.family == family_names[fam]]
        for name in mine:
            deploys[name].append((start_ms, ids[0]))
        when = start_ms + int(span * rng.uniform(0.2, 0.45)) // 1000 * 1000
        for k, vid in enumerate(ids[1:]):
            order = [str(x) for x in rng.permutation(mine)]
            if k == 0 and len(order) > 1 and rng.random() < 0.25:
                order = order[: math.ceil(len(order) / 2)]  # the rollout was paused
            step = int(rng.integers(20, 90)) * 60_000
            for j, name in enumerate(order):
                deploys[name].append((when + j * step, vid))
            when += int(span * rng.uniform(0.25, 0.35)) // 1000 * 1000
    return [replace(h, deploys=tuple(deploys[h.name])) for h in hosts]


def _leak(rng: np.random.Generator, versions: list[Version], hosts: list[Host]) -> list[Version]:
    """Most fleets have one leaking version (some two, in different families): rate 10 MiB/h to 2 GiB/h at
    its hosts' mean traffic; some of them crash at an OOM instead of waiting for the operator."""
    count = int(rng.choice([0, 1, 2], p=[0.25, 0.6, 0.15]))
    families = list(dict.fromkeys(v.family for v in versions))
    chosen = [str(f) for f in rng.permutation(families)[:count]]
    out = list(versions)
    for family in chosen:
        ids = [i for i, v in enumerate(versions) if v.family == family]
        vid = int(rng.choice(ids))
        running = [h for h in hosts if vid in versions_on(h)]
        if not running:
            continue
        rate = int(math.exp(rng.uniform(math.log(LEAK_PER_HOUR[0]), math.log(LEAK_PER_HOUR[1]))))
        per_hour = float(np.mean([h.requests_per_day for h in running])) / 24
        per_request = round_up(max(BLOCK, int(rate / per_hour)), BLOCK)
        out[vid] = replace(
            out[vid], leak_per_request=per_request, leak_rate_per_hour=rate, crash_on_oom=bool(rng.random() < 0.4)
        )
    return out
