"""One finding per cause and scope: the same story on many hosts (five A10s that all need a larger card,
three hosts that fragment) becomes one finding that lists its hosts, instead of a run of near-copies that
pushes every other cause out of the top of the list.

A group keeps what its members share (the action, the card, the target card) at the top of `metrics`, lists
`hosts`, and keeps each member whole under `per_host`. Its impact is the members' sum (the OOMs the one
change addresses), its confidence their impact-weighted mean, its window their union.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any

from .finding import Finding, Window, rank

# Kinds whose findings are about one host each, and the metrics that make two of them the same story.
GROUP_BY: dict[str, tuple[str, ...]] = {
    "sizing": ("action", "card", "allocator_step"),
    "fragmentation": ("card", "allocator_step"),
    "forecast": ("growth", "card", "allocator_step"),
    "cache_growth": ("card", "allocator_step"),
}
# How many host names a group's subject spells out; `metrics.hosts` has them all.
SUBJECT_HOSTS = 4


def group_by_scope(found: list[Finding]) -> list[Finding]:
    """The findings with each group of two or more same-story host findings replaced by one."""
    groups: dict[Hashable, list[Finding]] = {}
    for finding in rank(found):
        groups.setdefault(_key(finding), []).append(finding)
    return [members[0] if len(members) == 1 else _group(members) for members in groups.values()]


def _key(finding: Finding) -> Hashable:
    """Findings that tell one story share a key; every other finding has one of its own."""
    fields = GROUP_BY.get(finding.kind)
    if fields is None or not finding.metrics.get("instance"):
        return id(finding)
    return (finding.kind, *(finding.metrics.get(f) for f in fields))


def _group(members: list[Finding]) -> Finding:
    """One finding for members that are ranked, strongest first."""
    top = members[0]
    hosts = [_host(m) for m in members]
    card = top.metrics.get("card")
    scope = f"{len(hosts)} hosts" + (f" on {card}" if card else "")
    named = ", ".join(hosts[:SUBJECT_HOSTS]) + (", ..." if len(hosts) > SUBJECT_HOSTS else "")
    impact = sum(m.impact for m in members)
    evidence = f"{scope} ({', '.join(hosts)}) show the same; the strongest, {hosts[0]}: {top.evidence}"
    return Finding(
        kind=top.kind,
        subject=f"{scope}: {named}",
        evidence=evidence,
        advice=_for_all(top.advice, hosts[0], hosts),
        confidence=round(sum(m.confidence * m.impact for m in members) / impact, 2) if impact else top.confidence,
        impact=impact,
        window=_union([m.window for m in members]),
        metrics={**_shared_metrics(members), "hosts": hosts, "per_host": [_member(m) for m in members]},
    )


def _host(finding: Finding) -> str:
    gpu = finding.metrics.get("gpu_index")
    instance = str(finding.metrics["instance"])
    return instance if not gpu else f"{instance} GPU {gpu}"


def _for_all(advice: str, host: str, hosts: list[str]) -> str:
    """The strongest member's advice, said of every host where it names its own."""
    return re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w.-])", ", ".join(hosts), advice)


def _union(windows: list[Window | None]) -> Window | None:
    known = [w for w in windows if w is not None]
    if not known:
        return None
    starts = [w.start for w in known if w.start is not None]
    ends = [w.end for w in known if w.end is not None]
    recurring = {w.recurring for w in known}
    return Window(
        min(starts) if starts else None, max(ends) if ends else None, recurring.pop() if len(recurring) == 1 else None
    )


def _shared_metrics(members: list[Finding]) -> dict[str, Any]:
    """The metrics every member has with one value (the action, the card): what the group is about."""
    first = members[0].metrics
    return {k: v for k, v in first.items() if all(k in m.metrics and m.metrics[k] == v for m in members[1:])}


def _member(finding: Finding) -> dict[str, Any]:
    return {
        "subject": finding.subject,
        "evidence": finding.evidence,
        "advice": finding.advice,
        "confidence": finding.confidence,
        "impact": finding.impact,
        "metrics": finding.metrics,
    }
