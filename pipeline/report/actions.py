"""Findings as report entries: each with a one-line action to take, in the findings' ranked order.

The analyses' `advice` says what to do in full; the action is its headline, built from the finding's own
metrics. A leak's action names the allocation site when a snapshot of a leaking instance points at one, and the
service's own frame that called it.
"""

from __future__ import annotations

from typing import Any

import duckdb

from ..findings.finding import Finding
from .snapshots import leak_site


def finding_entries(con: duckdb.DuckDBPyConnection, found: list[Finding]) -> list[dict[str, Any]]:
    """The findings' documented JSON plus `rank`, `score` (impact x confidence) and `action`."""
    entries = []
    for rank, finding in enumerate(found, start=1):
        entry = finding.to_json()
        site = leak_site(con, list(finding.metrics.get("instances") or [])) if finding.kind == "leak" else None
        entry.update(
            rank=rank, score=round(finding.impact * finding.confidence, 3), action=action(finding, site), leak_site=site
        )
        entries.append(entry)
    return entries


def leak_place(suspect: dict[str, Any] | None) -> str:
    """Where a leak is, for a sentence: ` at SITE`, and ` (called from CALLER)` when the service's own frame that
    led there is another (a site inside a library is fixed in the code that called it); empty without one."""
    if not suspect:
        return ""
    caller = suspect.get("caller")
    called = f" (called from {caller})" if caller and caller != suspect["site"] else ""
    return f" at {suspect['site']}{called}"


def action(finding: Finding, site: dict[str, Any] | None = None) -> str:
    """The one thing to do about a finding, in a line."""
    m = finding.metrics
    subject = finding.subject
    match finding.kind:
        case "prompt_threshold" if m.get("cap"):
            return f"Cap batch x tokens at {m['cap']:,} on {subject}"
        case "leak":
            return f"Fix the leak{leak_place(site)} in {subject.removeprefix('model_version ')}"
        case "scheduled_job" if m.get("name"):
            return f"Move {m['name']} out of its window" + (
                f" ({finding.window.recurring})" if finding.window and finding.window.recurring else ""
            )
        case "fragmentation":
            step = str(m.get("allocator_step") or "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
            return f"{step[0].upper()}{step[1:]} on {_where(finding)}"
        case "sizing":
            return f"Resize {_where(finding)} ({m.get('card', 'its card')}): {m.get('action', 'review')}"
        case "external_pressure":
            return f"Give the service a GPU of its own on {', '.join(m.get('hosts') or [subject])}"
        case "forecast":
            return f"Act on {_where(finding, subject)} before it reaches 95 % of its card"
        case "cache_growth":
            return f"Alert on allocated memory, not reserved, on {_where(finding, subject)}: cache growth, not a leak"
        case "periodic_window":
            return f"Find what runs during {finding.window.recurring if finding.window else subject}"
        case _:
            return finding.advice.split(";")[0].split(". ")[0]


def _where(finding: Finding, default: object = None) -> str:
    """The hosts a finding is about: a group's (findings.grouping), else `default` (its instance)."""
    m = finding.metrics
    return ", ".join(m["hosts"]) if m.get("per_host") else str(default or m.get("instance", finding.subject))
