"""One run of the weekly review job: ingest what is new, pull the week from Prometheus, render the week's pages,
the index, retention."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from .. import api
from ..config import IngestOptions
from ..errors import OomlabError
from ..fields import read_mapping_file, with_mapping
from ..records import FAILED, INGESTED, SKIPPED
from .config import PrometheusSource, WeeklyConfig, load_config
from .index import headline_of, week_folders, write_index
from .weeks import Week, last_complete_week, parse_week

DONE, NEW_FINDING, PULL_INCOMPLETE = 0, 3, 4


@dataclass
class WeeklyRun:
    """What one run did: the summary printed (or sent to a chat hook as JSON) and the exit code."""

    week: Week
    out_dir: Path
    ingest: dict[str, int]
    headline: dict[str, Any]
    findings: int
    new_findings: list[dict[str, Any]]
    written: list[Path]
    removed_weeks: list[str] = field(default_factory=list)
    pruned: dict[str, int] | None = None
    alert_confidence: float = 0.7
    # one per [[prometheus]] source: url, samples, rows, missing (ranges not pulled), first_missing, notes, error
    pulls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """3 when a finding is new (the alert wins), else 4 when a Prometheus range could not be pulled, else 0."""
        if self.new_findings:
            return NEW_FINDING
        return PULL_INCOMPLETE if self.pulls_incomplete else DONE

    @property
    def pulls_incomplete(self) -> bool:
        return any(p["error"] or p["missing"] for p in self.pulls)

    @property
    def has_data(self) -> bool:
        return any(self.headline.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "week": self.week.name,
            "timezone": self.week.timezone,
            "since": self.week.since.isoformat(),
            "until": self.week.until.isoformat(),
            "has_data": self.has_data,
            "ingest": self.ingest,
            "pulls": self.pulls,
            "headline": self.headline,
            "findings": self.findings,
            "alert_confidence": self.alert_confidence,
            "new_findings": self.new_findings,
            "written": [str(p) for p in self.written],
            "index": str(self.out_dir / "index.html"),
            "removed_weeks": self.removed_weeks,
            "pruned": self.pruned,
            "exit_code": self.exit_code,
        }


def run_weekly(config_path: str | Path, week: str | None = None) -> WeeklyRun:
    """One run for `week` (`2026-W48`; default: the last complete ISO week in the config's time zone)."""
    config = load_config(config_path)
    chosen = parse_week(week, config.timezone) if week else last_complete_week(config.timezone)
    ingested = _ingest(config)
    pulls = [_pull(config, source, chosen) for source in config.prometheus]
    out = config.output
    folder = out / chosen.name
    if folder.is_symlink():
        raise OomlabError(
            f"{folder} is a symbolic link: the weekly job writes only into week folders it makes",
            hint=f"remove the link ({folder}) and run again",
        )
    weekly = api.weekly_report(config.database, chosen.since, chosen.until)
    written = weekly.write(folder / "weekly.html", folder / "weekly.json")
    keep = set()
    for event in api.important_ooms(
        config.database, weekly.doc["findings"], chosen.since, chosen.until, config.incidents
    ):
        html, data = folder / f"incident-{event}.html", folder / f"incident-{event}.json"
        written += api.incident_report(config.database, event_id=event).write(html, data)
        keep |= {html.name, data.name}
    for stale in folder.glob("incident-*"):  # an earlier run's choice that this one did not repeat
        if stale.name not in keep:
            stale.unlink()
    # compared before retention runs: keep_weeks = 1 must not delete last week before this week is held against it
    fresh = new_findings(weekly.doc, _previous_doc(out, chosen), config.alert_confidence)
    removed = _retain(out, config.keep_weeks, folder)
    pruned = (
        api.prune(config.database, chosen.until - timedelta(days=config.prune_before_days))
        if config.prune_before_days
        else None
    )
    written.append(write_index(out))
    return WeeklyRun(
        week=chosen,
        out_dir=out,
        ingest=ingested,
        headline=headline_of(weekly.doc),
        findings=len(weekly.doc["findings"]),
        new_findings=fresh,
        written=written,
        removed_weeks=removed,
        pruned=pruned,
        alert_confidence=config.alert_confidence,
        pulls=pulls,
    )


def new_findings(doc: dict[str, Any], previous: dict[str, Any] | None, confidence: float) -> list[dict[str, Any]]:
    """This week's findings at or above `confidence` whose kind and subject last week's JSON lacks (all of them
    when there is no JSON of last week)."""
    seen = {(f["kind"], f["subject"]) for f in (previous or {}).get("findings", [])}
    return [
        {"kind": f["kind"], "subject": f["subject"], "confidence": f["confidence"], "title": f.get("title")}
        for f in doc["findings"]
        if f["confidence"] >= confidence and (f["kind"], f["subject"]) not in seen
    ]


def _previous_doc(out: Path, week: Week) -> dict[str, Any] | None:
    path = out / week.previous.name / "weekly.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _ingest(config: WeeklyConfig) -> dict[str, int]:
    """Each input group through `api.ingest` with its labels; unchanged files are skipped as ever."""
    counts = {INGESTED: 0, SKIPPED: 0, FAILED: 0, "other": 0}
    for group in config.inputs:
        files = group.files()
        if not files:
            continue
        mapping = {**(read_mapping_file(group.mapping) if group.mapping else {}), **group.fields_map}
        options = IngestOptions(
            instance=group.instance,
            model_version=group.model_version,
            tags=group.tags,
            tz=group.tz,
            fields=with_mapping(mapping),
            columns=group.columns,
        )
        for result in api.ingest(config.database, files, options).results:
            counts[result.status if result.status in counts else "other"] += 1
    return counts


def _pull(config: WeeklyConfig, source: PrometheusSource, week: Week) -> dict[str, Any]:
    """The week from one Prometheus server: [since, until), so `until` less a millisecond (the pull's range is
    closed on both ends, and a sample at the next Monday 00:00 belongs to the next week). A pull that fails
    (unreachable, refused credentials, an unset secret) is recorded, not raised: the week is still rendered from
    what the database holds, and the exit code says so."""
    outcome: dict[str, Any] = {
        "url": source.url,
        "samples": 0,
        "rows": 0,
        "missing": 0,
        "first_missing": None,
        "notes": [],
        "error": None,
    }
    try:
        report = api.pull_prometheus(
            config.database,
            source.url,
            since=week.since,
            until=week.until - timedelta(milliseconds=1),
            step=source.step,
            matchers=source.matchers,
            instance=source.instance,
            credentials=dict(source.credentials),
            ca_file=source.ca_file,
            timeout_s=source.timeout_s,
        )
    except OomlabError as exc:
        outcome["error"] = exc.message
        return outcome
    outcome |= {
        "samples": report.samples,
        "rows": report.rows,
        "missing": len(report.missing),
        "first_missing": report.missing[0] if report.missing else None,
        "notes": list(report.notes),
    }
    return outcome


def _retain(out: Path, keep_weeks: int | None, written: Path) -> list[str]:
    """Delete all but the `keep_weeks` most recent week folders, never the one this run has just written (a rerun
    of an older week keeps its pages); the names removed."""
    if not keep_weeks:
        return []
    old = [f for f in week_folders(out)[:-keep_weeks] if f != written]
    for folder in old:
        shutil.rmtree(folder)
    return [f.name for f in old]
