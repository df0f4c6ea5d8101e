"""Findings as report entries, in the findings' ranked order: each as its documented JSON with its rank.

The words (title, summary, impact and confidence as text) are the finding's own (findings.wording): a page
quotes them and computes none of its own.
"""

from __future__ import annotations

from typing import Any

from ..findings.finding import Finding


def finding_entries(found: list[Finding]) -> list[dict[str, Any]]:
    """The findings' documented JSON plus `rank` and `score` (impact x confidence)."""
    return [
        {**finding.to_json(), "rank": rank, "score": round(finding.impact * finding.confidence, 3)}
        for rank, finding in enumerate(found, start=1)
    ]
