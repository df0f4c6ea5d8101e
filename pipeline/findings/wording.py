"""The words a finding is read in: one vocabulary for kinds and causes, one format for confidence and impact,
and each finding's title (its action) and summary (what happened), written once from its own numbers.

Every page, the terminal and the JSON quote these; none of them words or recomputes a finding again.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..analyses.fleet.forecast import LEVELS
from ..analyses.fleet.prompt_threshold import METRICS
from ..units import format_bytes_short, format_share, ooms_text

if TYPE_CHECKING:
    from .finding import Finding

# Finding kinds and OOM causes as a reader says them (the JSON keeps the names; people read these).
KIND_WORDS: dict[str, str] = {
    "periodic_window": "recurring window",
    "scheduled_job": "scheduled job",
    "leak": "memory leak",
    "prompt_threshold": "requests too large",
    "fragmentation": "fragmentation",
    "external_pressure": "another process on the GPU",
    "capacity": "card too small",
    "forecast": "filling up",
    "sizing": "card size",
    "cache_growth": "cache growth, not a leak",
}
CAUSE_WORDS: dict[str, str] = {
    "leak": "memory leak",
    "fragmentation": "fragmentation",
    "capacity": "request too large for the card",
    "transient_peak": "one request's peak",
    "external_pressure": "another process on the GPU",
    "process_cap": "per-process memory cap",
    "preallocated_pool": "pool reserved at start-up",
    "allocator_cache": "allocator cache growth (not a leak)",
    "cache_growth": "allocator cache growth (not a leak)",
    "unknown": "cause not determined",
}
# Subject prefixes the analyses write, as words.
_SUBJECT_WORDS = (("model_version ", "model version "), ("instance ", "host "), ("card card ", "card "))
# The highest band a forecast names (analyses.fleet.forecast.LEVELS): a device past it is told to act now.
_FULL = max(LEVELS)


def kind_words(kind: str) -> str:
    return KIND_WORDS.get(kind, kind.replace("_", " "))


def cause_words(cause: str | None) -> str:
    return CAUSE_WORDS.get(cause or "unknown", str(cause).replace("_", " "))


def subject_words(subject: str) -> str:
    for name, words in _SUBJECT_WORDS:
        subject = subject.replace(name, words)
    return subject


def confidence_text(confidence: float) -> str:
    """0.973 -> "97 %": the one way confidence is written, on pages and in the terminal (units.format_share)."""
    return format_share(confidence)


def impact_text(finding: Finding) -> str:
    """The impact with its unit: the OOMs the finding explains (a forecast's are to come)."""
    count = round(finding.impact)
    if count == 0:
        return "no OOM yet" if finding.kind in ("forecast", "cache_growth") else "no OOM"
    noun = "OOM" if count == 1 else "OOMs"
    return f"{count:,} {noun} expected" if finding.kind == "forecast" else f"{count:,} {noun}"


def leak_place(suspect: dict[str, Any] | None) -> str:
    """Where a leak is, for a sentence: ` at SITE`, and ` (called from CALLER)` when the service's own frame that
    led there is another (a site inside a library is fixed in the code that called it); empty without one."""
    if not suspect:
        return ""
    caller = suspect.get("caller")
    called = f" (called from {caller})" if caller and caller != suspect["site"] else ""
    return f" at {suspect['site']}{called}"


def title(finding: Finding) -> str:
    """The one thing to do about a finding, in a line; its urgency follows from its kind and numbers."""
    m = finding.metrics
    match finding.kind:
        case "prompt_threshold" if m.get("cap"):
            return f"Cap {_metric(m)} at {m['cap']:,} on {subject_words(finding.subject)}"
        case "leak" if m.get("models"):  # findings.swap_leak: the model swaps of one process leak
            held = format_bytes_short(m.get("growth_bytes_per_return") or 0)
            return f"Unload each model fully before the next on {m['instance']}: every return held {held} more"
        case "leak":
            version = finding.subject.removeprefix("model_version ")
            return f"Fix the leak{leak_place(m.get('leak_site'))} in {version}"
        case "scheduled_job" if m.get("name"):
            when = f" ({finding.window.recurring})" if finding.window and finding.window.recurring else ""
            return f"Move {m['name']} out of its window{when}"
        case "fragmentation":
            step = str(m.get("allocator_step") or "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
            return f"{step[0].upper()}{step[1:]} on {hosts_of(finding)}"
        case "sizing":
            return f"Resize {hosts_of(finding)} ({m.get('card', 'its card')}): {m.get('action', 'review')}"
        case "external_pressure":
            return f"Give the service a GPU of its own on {', '.join(m.get('hosts') or [finding.subject])}"
        case "forecast":
            return _forecast_title(finding)
        case "cache_growth":
            return f"Alert on allocated memory, not reserved, on {hosts_of(finding, finding.subject)}: cache growth"
        case "periodic_window":
            return f"Find what runs during {finding.window.recurring if finding.window else finding.subject}"
        case "capacity" if m.get("token_budget"):
            return f"Cap batch x tokens at {m['token_budget']:,} on {subject_words(finding.subject)}"
        case _:
            first = finding.advice.split(";")[0].split(". ")[0]
            return first[:1].upper() + first[1:]


def _forecast_title(finding: Finding) -> str:
    """Already past the band: say so; else the date it gets there (never a date before the data's end)."""
    m = finding.metrics
    where = hosts_of(finding, finding.subject)
    level = m.get("level_now")
    if level is not None and level >= _FULL:
        return f"Act now on {where}: it already holds {level:.0%} of its card"
    date = m.get("date_95") or m.get("date_80")
    band = "95 %" if m.get("date_95") else "80 %"
    when = f" by {_day(date)}" if date else ""
    return f"Act on {where}{when}, when it reaches {band} of its card"


def _day(value: object) -> str:
    return f"{datetime.fromisoformat(value):%Y-%m-%d}" if isinstance(value, str) else str(value)


def hosts_of(finding: Finding, default: object = None) -> str:
    """The hosts a finding is about: a group's (findings.grouping), else `default` (its instance)."""
    m = finding.metrics
    return ", ".join(m["hosts"]) if m.get("per_host") else str(default or m.get("instance", finding.subject))


def summary(finding: Finding) -> str:
    """One sentence of what happened: counts, where, when; the statistics stay in the evidence."""
    m = _numbers(finding)
    when = _when(finding)
    match finding.kind:
        case "prompt_threshold" if m.get("threshold") is not None:
            return (
                f"On {subject_words(finding.subject)} cards{when}, {m.get('failures_above', 0):,} of "
                f"{m.get('requests_above', 0):,} requests above "
                f"{m['threshold']:,.0f} {_metric(m)} failed; the largest that succeeded was "
                f"{m.get('largest_success', 0):,}."
            )
        case "leak" if m.get("leaking_lifetimes"):
            return (
                f"{m['leaking_lifetimes']} of {m.get('lifetimes', 0)} process lifetimes of "
                f"{finding.subject.removeprefix('model_version ')} on {', '.join(m.get('instances') or [])} grew by "
                f"about {_leak_rate(m)} and never gave it back; {ooms_text(m.get('leak_ooms', 0))}{when}."
            )
        case "scheduled_job" if m.get("name") and m.get("ooms_in") is not None:
            return (
                f"{ooms_text(m['ooms_in'])} fell inside {m['name']}'s runs on "
                f"{', '.join(m.get('hosts_affected') or m.get('hosts') or [])}, where traffic alone explains "
                f"{m.get('expected_in') or 0:.0f}."
            )
        case "fragmentation" if m.get("median_unallocated_bytes") is not None:
            strongest = f" on {m['instance']}" if finding.metrics.get("per_host") else ""
            return (
                f"{ooms_text(finding.impact)} on {hosts_of(finding)}{when} failed with memory reserved but "
                f"unallocated (median {format_bytes_short(m['median_unallocated_bytes'])}{strongest}, "
                f"{m.get('median_unallocated_to_requested') or 0:,.0f}x the request): no free block was large enough."
            )
        case "cache_growth" if m.get("reserved_end_bytes") is not None:
            strongest = (
                f" (on {m['instance']}: {format_bytes_short(m['reserved_end_bytes'])} reserved"
                if (m.get("per_host"))
                else f" ({format_bytes_short(m['reserved_end_bytes'])} reserved"
            )
            return (
                f"Reserved memory climbed while allocated stayed flat on {hosts_of(finding, finding.subject)}{when}"
                f"{strongest} against {format_bytes_short(m.get('allocated_end_bytes') or 0)} allocated): "
                "the allocator keeps the blocks requests freed."
            )
    per_host = finding.metrics.get("per_host")
    if per_host:
        strongest = per_host[0]
        return (
            f"The same on {len(per_host)} hosts{when}; the strongest, {strongest['subject']}: "
            f"{_first_clause(strongest['evidence'])}."
        )
    return _first_clause(finding.evidence) + when + "."


def _metric(metrics: dict[str, Any]) -> str:
    """The request size a threshold is on, in words ("batch x (input + output) tokens")."""
    return METRICS.get(str(metrics.get("metric")), "batch x tokens")


def _numbers(finding: Finding) -> dict[str, Any]:
    """A finding's metrics; a group's (findings.grouping) filled in from its strongest host's."""
    per_host = finding.metrics.get("per_host") or []
    strongest = per_host[0].get("metrics", {}) if per_host else {}
    return {**strongest, **finding.metrics}


def _leak_rate(metrics: dict[str, Any]) -> str:
    """The median growth in the unit the leak analysis measured it in (per hour, or per request for a capture
    too short to rate by the clock)."""
    if metrics.get("rate_unit") == "request":
        return f"{format_bytes_short(metrics.get('median_growth_bytes_per_request') or 0)} per request"
    return f"{format_bytes_short(metrics.get('median_slope_bytes_per_hour') or 0)}/h"


def _when(finding: Finding) -> str:
    """`, 2026-11-16 00:29 to 2026-11-22 20:22 UTC` (the end's date left out on the same day, the end left out
    in the same minute), or the recurring rule."""
    window = finding.window
    if window is None or window.start is None:
        return ""
    if window.recurring:
        return f", {window.recurring}"
    start, end = f"{window.start:%Y-%m-%d %H:%M}", ""
    if window.end is not None:
        end_text = f"{window.end:%Y-%m-%d %H:%M}"
        same_day = end_text[:10] == start[:10]
        end = "" if end_text == start else f" to {end_text[11:] if same_day else end_text}"
    return f", {start}{end} UTC"


def _first_clause(evidence: str) -> str:
    """The evidence up to its first semicolon or sentence end: the analyses write the observation first."""
    clause = evidence.split("; ")[0].split(". ")[0].rstrip(".")
    return clause[:1].upper() + clause[1:]
