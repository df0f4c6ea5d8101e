"""Findings: what every fleet analysis reports, in one typed shape, ranked for people to act on."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from . import wording

# The kinds `oomlab findings` reports; a JSON consumer can switch on these names.
KINDS: tuple[str, ...] = (
    "periodic_window",
    "scheduled_job",
    "leak",
    "prompt_threshold",
    "fragmentation",
    "external_pressure",
    "capacity",
    "forecast",
    "sizing",
    "cache_growth",
)


@dataclass(frozen=True)
class Window:
    """The time a finding is about; either end may be open."""

    start: datetime | None = None
    end: datetime | None = None
    recurring: str | None = None  # e.g. "daily 01:00-02:30 UTC"


@dataclass(frozen=True)
class Finding:
    """One conclusion with the numbers behind it.

    `impact` orders findings: roughly the OOMs (or OOM-equivalents) it explains or will cause.
    `confidence` is 0..1: how sure the analysis is that the pattern is real and the cause right.
    """

    kind: str
    subject: str
    evidence: str
    advice: str
    confidence: float
    impact: float
    window: Window | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown finding kind {self.kind!r}")
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence {self.confidence} is not within 0..1")

    # Its words are read from its own numbers (findings.wording), never stored: a finding copied with new metrics
    # (grouped, merged, given its leak site) cannot carry the words of the one it was copied from.
    @property
    def title(self) -> str:
        """What to do about it, in a line."""
        return wording.title(self)

    @property
    def summary(self) -> str:
        """One sentence of what happened: counts, where, when."""
        return wording.summary(self)

    @property
    def impact_text(self) -> str:
        """The impact with its unit ("115 OOMs"), as every output writes it."""
        return wording.impact_text(self)

    @property
    def confidence_text(self) -> str:
        """The confidence as every output writes it ("97 %")."""
        return wording.confidence_text(self.confidence)

    @property
    def kind_text(self) -> str:
        """The kind in words ("another process on the GPU")."""
        return wording.kind_words(self.kind)

    def to_json(self) -> dict[str, Any]:
        """The documented JSON shape (docs/findings.md)."""
        data = asdict(self)
        data.update(
            title=self.title,
            summary=self.summary,
            impact_text=self.impact_text,
            confidence_text=self.confidence_text,
            kind_text=self.kind_text,
        )
        window = data.pop("window")
        data["window"] = (
            None
            if window is None
            else {"start": _iso(window["start"]), "end": _iso(window["end"]), "recurring": window["recurring"]}
        )
        return data


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def rank(findings: list[Finding]) -> list[Finding]:
    """Most important first: impact weighted by confidence; ties broken by kind and subject (stable)."""
    return sorted(findings, key=lambda f: (-f.impact * f.confidence, KINDS.index(f.kind), f.subject))
