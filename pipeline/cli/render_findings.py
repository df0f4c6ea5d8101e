"""Terminal and JSON output of `oomlab findings`."""

from __future__ import annotations

import csv
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rich.padding import Padding
from rich.text import Text

from ..assets import write_atomic
from ..units import ooms_text
from .terminal import pipe_console, plain, visible

if TYPE_CHECKING:
    from ..api import FindingsResult
    from ..findings.finding import Finding


def findings_document(result: FindingsResult, since: datetime | None, until: datetime | None) -> dict[str, object]:
    """The documented JSON document (docs/findings.md)."""
    return {
        "generated_at": datetime.now(UTC).replace(tzinfo=None, microsecond=0).isoformat(),
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
        "data_quality": result.data_quality.to_json() if result.data_quality else None,
        "untimed_left_out": result.untimed_left_out,
        "findings": [f.to_json() for f in result],
    }


def write_findings_json(result: FindingsResult, since: datetime | None, until: datetime | None, path: str) -> None:
    """Write the JSON document to a file, or stdout for `-`."""
    text = json.dumps(findings_document(result, since, until), indent=2, default=str) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        write_atomic(path, text)


_CSV_COLUMNS = (
    "rank",
    "kind",
    "subject",
    "title",
    "summary",
    "confidence",
    "impact",
    "advice",
    "evidence",
    "start",
    "end",
    "recurring",
)


def write_findings_csv(result: FindingsResult) -> None:
    """The ranked findings as CSV on stdout, one row each: the numbers as the JSON document has them (its
    `metrics` are left to the JSON)."""
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(_CSV_COLUMNS)
    for rank, finding in enumerate(result, start=1):
        document = finding.to_json()
        window = document.get("window") or {}
        row = {**document, "rank": rank, **{k: window.get(k) for k in ("start", "end", "recurring")}}
        writer.writerow(["" if row.get(c) is None else row[c] for c in _CSV_COLUMNS])


def _heading(number: int, finding: Finding) -> Text:
    heading = Text(f"{number}. ", style="bold")
    heading.append(visible(finding.title or finding.subject), style="bold")
    return heading


def _facts(finding: Finding) -> Text:
    """What it is, how much it explains, how sure: the same words the pages and the JSON carry."""
    return plain(f"{finding.kind_text} · {finding.impact_text} · confidence {finding.confidence_text}", style="dim")


def print_findings(result: FindingsResult, verbose: bool = False) -> None:
    """The data-quality note first (the data behind every finding), then the ranked findings: each its action
    (title), what happened, and what to do; why it is believed (the evidence) with `verbose`."""
    console = pipe_console(soft_wrap=False)
    if result.data_quality is not None:
        console.print(plain(result.data_quality.text, style="bold yellow"), end="\n\n")
    if result.untimed_left_out:
        n = result.untimed_left_out
        left = f"{ooms_text(n)} without a time {'are' if n != 1 else 'is'} outside the window"
        console.print(plain(f"{left}: run without --since/--until for the findings over them", style="yellow"))
        console.print()
    found = list(result)
    if not found:
        console.print("no findings: nothing in the data stands out")
        return
    for number, finding in enumerate(found, start=1):
        console.print(_heading(number, finding))
        console.print(Padding(plain(finding.summary), (0, 0, 0, 4)))
        console.print(Padding(_facts(finding), (0, 0, 0, 4)))
        if verbose:
            console.print(Padding(plain("why: " + finding.evidence), (0, 0, 0, 4)))
        console.print(Padding(plain("-> " + finding.advice, style="green"), (0, 0, 1, 4)))
    if not verbose:
        console.print(plain("(--verbose: why each finding is believed)", style="dim"))
