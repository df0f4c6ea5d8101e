"""Every fleet analysis's findings, collected, merged where they describe the same thing, and ranked."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from importlib import import_module

import duckdb

from ..analyses.shared import shared_results
from ..units import format_bytes
from .finding import Finding, rank

# The modules of this package that report findings, each with `findings(con, since, until) -> list[Finding]`.
FINDERS: tuple[str, ...] = (
    "causes",
    "leak",
    "scheduled_job",
    "periodic_window",
    "prompt_threshold",
    "sizing",
    "forecast",
)


def collect_findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """All findings over [since, until], merged and most important first."""
    found: list[Finding] = []
    with shared_results():
        for name in FINDERS:
            module = import_module(f".{name}", __package__)
            found.extend(module.findings(con, since, until))
    return merge_related(rank(found))


def _topic(finding: Finding) -> str:
    """What a finding is about, so that two analyses' views of one problem become one finding.

    The job analysis and the cause analysis both name a job ("job nightly-backup"); the capacity cause and
    the prompt-threshold model both describe one card size, which they name differently.
    """
    metrics = finding.metrics
    if finding.kind == "prompt_threshold" and metrics.get("device_total") and not metrics.get("model_version"):
        return f"card {format_bytes(metrics['device_total'], 'GiB')}"
    if finding.kind == "capacity" and metrics.get("card"):
        return f"card {metrics['card']}"
    return finding.subject.lower()


def merge_related(ranked: list[Finding]) -> list[Finding]:
    """Fold each finding into a higher-ranked one on the same topic: its evidence is appended, its
    kind, subject, advice and metrics kept under `related`, and the larger impact kept."""
    merged: dict[str, Finding] = {}
    for finding in ranked:
        topic = _topic(finding)
        if topic not in merged:
            merged[topic] = finding
            continue
        keeper = merged[topic]
        related = [
            *keeper.metrics.get("related", []),
            {
                "kind": finding.kind,
                "subject": finding.subject,
                "evidence": finding.evidence,
                "advice": finding.advice,
                "confidence": finding.confidence,
                "metrics": finding.metrics,
            },
        ]
        merged[topic] = replace(
            keeper,
            evidence=f"{keeper.evidence} Also ({finding.kind}): {finding.evidence}",
            impact=max(keeper.impact, finding.impact),
            metrics={**keeper.metrics, "related": related},
        )
    return rank(list(merged.values()))
