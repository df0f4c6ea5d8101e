"""Terminal and JSON output of `oomlab findings`."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .analyses.findings import Finding


def findings_document(found: list[Finding], since: datetime | None, until: datetime | None) -> dict[str, object]:
    """The documented JSON document (docs/findings.md)."""
    return {
        "generated_at": datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0).isoformat(),
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
        "findings": [f.to_json() for f in found],
    }


def write_findings_json(found: list[Finding], since: datetime | None, until: datetime | None, path: str) -> None:
    """Write the JSON document to a file, or stdout for `-`."""
    text = json.dumps(findings_document(found, since, until), indent=2, default=str) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        Path(path).write_text(text, encoding="utf-8")


def print_findings(found: list[Finding]) -> None:
    """Ranked findings as a table: what, why, what to do."""
    console = Console(soft_wrap=True)
    if not found:
        console.print("no findings: nothing in the data stands out")
        return
    table = Table("#", "kind", "subject", "evidence", "advice", "conf.", title="findings, most important first",
                  title_justify="left", show_lines=True)
    for number, finding in enumerate(found, start=1):
        table.add_row(str(number), finding.kind, finding.subject, finding.evidence, finding.advice,
                      f"{finding.confidence:.2f}")
    console.print(table)
