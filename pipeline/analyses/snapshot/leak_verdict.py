"""Whether an allocation site is a leak suspect, why, and how sure: a judgement over one site's evidence."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...parse.snapshot.stacks import NO_STACK
from ...units import format_bytes
from .leak_evidence import RESIDENT_PATHS

# One request in flight holds at most two shapes at one site: a decode step concatenates one token onto the
# cache layer by layer, so layers already past the step hold t + 1 tokens while the rest still hold t. More
# shapes than that at one request-path site is memory of several requests, still held.
INFLIGHT_SHAPES = 2
# A baseline that rises in at least this share of the trace's window steps is a steady climb; weights or a
# resident cache arrive once (one rising step) and then stay flat.
MIN_RISING_SHARE = 0.5
# Without a module forward or generation frame the call path cannot say the memory belongs to a request: a
# pile there may be a store the code keeps on purpose, so the evidence counts for less.
UNKNOWN_PATH_WEIGHT = 0.6
# The most one can be sure of from what the data holds: the final blocks alone (history off) cannot show
# time; one snapshot with a trace cannot tell a large bounded cache from a leak; growth across snapshots of
# one process is the direct observation, surer with every step.
MAX_CONFIDENCE = {"none": 0.75, "wrapped": 0.9, "whole": 0.9}
MAX_SERIES_CONFIDENCE = {1: 0.95}
MAX_SERIES_CONFIDENCE_MANY = 0.98
# Supporting evidence counts half: whole rounds of blocks per shape and blocks that outlived the visible trace
# agree with a leak, but a resident store shows them too.
SUPPORTING_WEIGHT = 0.5
SERIES_WEIGHT = 0.9
# A pile that did not grow between snapshots of the process is as likely a cache at capacity as a leak that saw
# no traffic in between: even odds.
SERIES_FLAT_WEIGHT = 0.5


@dataclass(frozen=True)
class Basis:
    """What a judgement rests on: the trace (none / whole / wrapped), the snapshots, the materiality floor, and
    the live bytes without a call stack (which no judgement can place)."""

    trace: str
    snapshots: int
    floor_bytes: int
    no_stack_bytes: int = 0


@dataclass(frozen=True)
class Verdict:
    """A suspect's confidence (0..1) and the reasons, one clause each."""

    confidence: float
    reason: str


def judge(site: dict[str, Any], basis: Basis) -> Verdict | None:
    """The verdict on one site's evidence (a row of `leaks.site_evidence`), or None when it is no suspect."""
    if site["site"] == NO_STACK or site["live_bytes"] < basis.floor_bytes:
        return None  # without a call path a leak cannot be told from weights; below the floor it is no cause
    grew_series = grew_across_snapshots(site)
    if site["path"] in RESIDENT_PATHS and not grew_series:
        return None
    if (site.get("series_growth_bytes") or 0) <= -basis.floor_bytes:
        return None  # it held less in the newest snapshot than in the oldest: released memory is no leak
    if not (site["shapes"] > INFLIGHT_SHAPES or grew_in_trace(site, basis) or grew_series):
        return None
    recycled = _recycled_share(site, basis)
    if recycled >= 1 and not grew_series:
        return None  # the trace freed as much of its older memory as it still holds: it turns over
    evidence = [(strength, clause) for strength, clause in _evidence(site, basis) if strength > 0]
    clauses = [_path_clause(site["path"])] + [clause for _, clause in evidence]
    confidence = _combined(strength for strength, _ in evidence)
    confidence *= UNKNOWN_PATH_WEIGHT if site["path"] == "unknown" else 1
    confidence = min(confidence, _cap(site, basis, grew_series))  # what the basis allows, before the doubts
    for factor, clause in _doubts(site, basis, recycled, grew_series):
        confidence *= factor
        clauses.append(clause)
    return Verdict(round(confidence, 3), "; ".join(clauses))


def grew_in_trace(site: dict[str, Any], basis: Basis) -> bool:
    """The site's baseline climbed steadily across the visible trace and the growth is still held."""
    return (
        site["growth_bytes"] >= basis.floor_bytes
        and site["window_steps"] > 0
        and site["rising_windows"] >= MIN_RISING_SHARE * site["window_steps"]
    )


def grew_across_snapshots(site: dict[str, Any]) -> bool:
    """The site held memory in every snapshot of the series and rose at every step, by the floor in all
    (`series.series_growth`'s `grew`)."""
    return bool(site.get("series_grew"))


def _evidence(site: dict[str, Any], basis: Basis) -> list[tuple[float, str]]:
    """(strength 0..1, clause) for each kind of evidence; a strength of 0 means it says nothing here."""
    shapes, rounds, blocks = site["shapes"], site["round_blocks"], site["live_blocks"]
    items = [
        (
            1 - INFLIGHT_SHAPES / shapes if shapes > INFLIGHT_SHAPES else 0.0,
            f"{blocks:,} live blocks in {shapes} shapes: more requests' memory than one in flight holds",
        ),
        (
            SUPPORTING_WEIGHT * (1 - 1 / rounds) if rounds > 1 and shapes > 1 else 0.0,
            f"every shape held in whole rounds of {rounds} blocks ({blocks // max(rounds, 1):,} rounds)",
        ),
        (min(1.0, site["share_of_allocated"]), f"{site['share_of_allocated']:.0%} of allocated memory"),
    ]
    items.append(_outlived(site, basis))
    if grew_in_trace(site, basis):
        items.append(
            (
                site["rising_windows"] / site["window_steps"],
                f"its baseline grew {_b(site['growth_bytes'])} in {site['rising_windows']} of "
                f"{site['window_steps']} steps of the trace",
            )
        )
    if grew_across_snapshots(site):
        steps = site["series_steps"]
        items.append(
            (
                SERIES_WEIGHT,
                f"grew {_b(site['series_growth_bytes'])} across {steps + 1} snapshots, at every step",
            )
        )
    return items


def _combined(strengths: Iterable[float]) -> float:
    """Independent pieces of evidence together: the chance that not every one of them is wrong."""
    doubt = 1.0
    for strength in strengths:
        doubt *= 1 - strength
    return 1 - doubt


def _doubts(site: dict[str, Any], basis: Basis, recycled: float, grew_series: bool) -> list[tuple[float, str]]:
    """(factor, clause) for what speaks against a leak: older memory the trace saw freed, and a series of
    snapshots across which the site did not grow (a cache at capacity; or no traffic came between them)."""
    doubts = []
    if recycled > 0:
        freed = _b(site["older_freed_bytes"])
        doubts.append((1 - recycled, f"but the trace freed {freed} of its older blocks (a bounded cache?)"))
    if basis.snapshots > 1 and not grew_series:
        doubts.append((SERIES_FLAT_WEIGHT, f"but it did not grow across the {basis.snapshots} snapshots"))
    return doubts


def _outlived(site: dict[str, Any], basis: Basis) -> tuple[float, str]:
    """Blocks allocated before a wrapped trace that outlived all of it while the site kept allocating."""
    older, blocks, allocs = site["before_trace_blocks"], site["live_blocks"], site["trace_allocs"]
    if basis.trace != "wrapped" or older == 0 or allocs == 0:
        return 0.0, ""
    return (
        SUPPORTING_WEIGHT * older / blocks,
        f"{older:,} blocks predate the trace and outlived it while the site allocated {allocs:,} more in it",
    )


def _recycled_share(site: dict[str, Any], basis: Basis) -> float:
    """How much of the site's older memory the trace saw freed beyond what a request in flight when it began
    frees (at most one round of the site's largest shape, and at least the floor), against what it still
    holds older (0..1): a cache at capacity turns its old memory over, a leak never frees it."""
    allowance = max(basis.floor_bytes, site["largest_round_bytes"])
    excess = site["older_freed_bytes"] - allowance
    if excess <= 0:
        return 0.0
    older = site["before_trace_bytes"]
    return 1.0 if older <= 0 else min(1.0, excess / older)


def _path_clause(path: str) -> str:
    if path == "request":
        return "allocated while serving (a module forward or generate) yet still held"
    if path == "load":
        return "allocated while loading the model, yet it grew across snapshots: a model loaded again, the old kept"
    if path == "pool":
        return "in a private (CUDA graph) pool, yet it grew across snapshots"
    return "its call path shows neither model loading nor serving"


def _cap(site: dict[str, Any], basis: Basis, grew_series: bool) -> float:
    if grew_series:
        return MAX_SERIES_CONFIDENCE.get(site["series_steps"], MAX_SERIES_CONFIDENCE_MANY)
    return MAX_CONFIDENCE[basis.trace]


def _b(value: int) -> str:
    return format_bytes(value)
