"""Every fleet analysis's findings, collected, merged where they describe the same thing, and ranked."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from importlib import import_module

import duckdb

from ..analyses.fleet.whole_history import whole_history_once
from ..analyses.shared import shared_results
from ..units import format_bytes
from .finding import Finding, rank
from .grouping import group_by_scope
from .leak_site import leak_site

# The modules of this package that report findings, each with `findings(con, since, until) -> list[Finding]`.
FINDERS: tuple[str, ...] = (
    "causes",
    "leak",
    "swap_leak",
    "cache_growth",
    "scheduled_job",
    "periodic_window",
    "prompt_threshold",
    "sizing",
    "forecast",
)


def collect_findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """All findings over [since, until], grouped (one per cause and scope), merged where two analyses see one
    problem, and most important first."""
    found: list[Finding] = []
    with shared_results():
        whole_history_once(con)
        for name in FINDERS:
            module = import_module(f".{name}", __package__)
            found.extend(module.findings(con, since, until))
    return present(con, merge_related(rank(group_by_scope(fold_cache_forecasts(found)))))


def present(con: duckdb.DuckDBPyConnection, found: list[Finding]) -> list[Finding]:
    """The final findings, a leak's with the allocation site a snapshot shows (`metrics.leak_site`), which its
    title names (findings.wording)."""
    return [
        replace(f, metrics={**f.metrics, "leak_site": leak_site(con, list(f.metrics.get("instances") or []))})
        if f.kind == "leak"
        else f
        for f in found
    ]


def fold_cache_forecasts(found: list[Finding]) -> list[Finding]:
    """Each forecast of allocator cache growth folded into the cache_growth finding of its device (before the
    findings are grouped across hosts, while both still name one device): the level the forecast projects climbs
    because the cache does, and the cache_growth finding says what that means."""
    growth = {_device(f): f for f in found if f.kind == "cache_growth"}
    kept: list[Finding] = []
    for finding in found:
        if _is_cache_forecast(finding) and _device(finding) in growth:
            key = _device(finding)
            growth[key] = _fold(growth[key], finding)
        elif finding.kind != "cache_growth":
            kept.append(finding)
    return kept + list(growth.values())


def _device(finding: Finding) -> tuple[object, object]:
    return finding.metrics.get("instance"), finding.metrics.get("gpu_index", 0)


def _is_cache_forecast(finding: Finding) -> bool:
    return finding.kind == "forecast" and finding.metrics.get("growth") == "allocator_cache"


def _topic(finding: Finding) -> str:
    """What a finding is about, so that two analyses' views of one problem become one finding.

    The job analysis and the cause analysis both name a job ("job nightly-backup"); the capacity cause, the
    prompt-threshold model and the sizing rule's upgrade all describe one card size that the requests
    outgrow; fragmentation and the sizing rule's allocator fix both describe hosts whose card is full of
    reserved-but-unallocated memory.
    """
    metrics = finding.metrics
    card_wide = finding.kind == "prompt_threshold" and not metrics.get("model_version")
    upgrade = finding.kind == "sizing" and metrics.get("action") == "upgrade"
    if (card_wide or upgrade) and metrics.get("device_total"):
        return _card_topic(metrics["device_total"])
    if finding.kind == "fragmentation" or (finding.kind == "sizing" and metrics.get("action") == "fix_allocator"):
        return "unallocated memory on " + ", ".join(sorted(metrics.get("hosts") or [str(metrics.get("instance"))]))
    if finding.kind == "capacity" and metrics.get("card"):
        return f"card {metrics['card']}"
    return finding.subject.lower()


# Which finding keeps the story when two share a topic, whatever their rank (higher keeps it; ties go to rank):
# a sizing finding states a consequence (this card is too small, the allocator holds the card) rather than a cause;
# a capacity cause says the card is outgrown, and the prompt threshold on the same card says by which requests and
# where to cap them, the one thing to act on.
_STORY = {"sizing": 0, "capacity": 1}
_STORY_DEFAULT = 2


def merge_related(ranked: list[Finding]) -> list[Finding]:
    """Fold each finding into a higher-ranked one on the same topic (or, for a consequence such as sizing,
    the cause into which it folds): its evidence is appended, its kind, subject, advice and metrics kept
    under `related`, and the larger impact kept."""
    merged: dict[str, Finding] = {}
    for finding in ranked:
        topic = _topic(finding)
        if topic not in merged:
            merged[topic] = finding
            continue
        keeper = merged[topic]
        if _STORY.get(finding.kind, _STORY_DEFAULT) > _STORY.get(keeper.kind, _STORY_DEFAULT):
            keeper, finding = finding, keeper
        merged[topic] = _fold(keeper, finding)
    return rank(_fold_capacity_into_versions(rank(list(merged.values()))))


def _fold_capacity_into_versions(ranked: list[Finding]) -> list[Finding]:
    """A card's capacity finding where the card has prompt thresholds per model version only (a card-wide one
    shares its topic and took it already): folded into the highest-ranked of them, so that the card's story is
    told once, by a finding that says where to cap, and no second cap for the same requests stands beside it.
    The other versions' thresholds stay findings of their own: each has its own cap."""
    by_card: dict[str, Finding] = {}
    for finding in ranked:
        if finding.kind == "prompt_threshold" and finding.metrics.get("device_total"):
            by_card.setdefault(_card_topic(finding.metrics["device_total"]), finding)
    folded: dict[int, Finding] = {}
    kept: list[Finding] = []
    for finding in ranked:
        target = by_card.get(_topic(finding)) if finding.kind == "capacity" else None
        if target is None:
            kept.append(finding)
        else:
            folded[id(target)] = _fold(folded.get(id(target), target), finding)
    return [folded.get(id(f), f) for f in kept]


def _card_topic(device_total: int) -> str:
    """The topic of everything said about one card size: `card 21.96 GiB`."""
    return f"card {format_bytes(device_total, 'GiB')}"


def _fold(keeper: Finding, other: Finding) -> Finding:
    """`keeper` with `other` added as a related view of the same problem."""
    related = [
        *keeper.metrics.get("related", []),
        *other.metrics.get("related", []),
        {
            "kind": other.kind,
            "subject": other.subject,
            "evidence": other.evidence,
            "advice": other.advice,
            "confidence": other.confidence,
            "metrics": {k: v for k, v in other.metrics.items() if k != "related"},
        },
    ]
    return replace(
        keeper,
        evidence=f"{keeper.evidence} Also ({other.kind}): {other.evidence}",
        impact=max(keeper.impact, other.impact),
        metrics={**keeper.metrics, "related": related},
    )
