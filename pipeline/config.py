"""Options shared by the stages of one ingest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .fields import FIELDS, Field


def instance_from_filename(path: str | Path) -> str:
    """`gpu-a-0.log.gz` -> `gpu-a-0`: the file name without its extensions."""
    return Path(path).name.split(".", 1)[0]


@dataclass(frozen=True)
class IngestOptions:
    """Labels, field mapping and time zone for one `oomlab ingest` call."""

    instance: str | None = None
    model_version: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    tz: str | None = None
    fields: tuple[Field, ...] = FIELDS

    def instance_for(self, path: str | Path) -> str:
        """The instance label of a file: --instance, else its file name."""
        return self.instance or instance_from_filename(path)

    def labels_for(self, path: str | Path) -> dict[str, object]:
        """What `sources.labels` records for a file."""
        return {"instance": self.instance_for(path), "model_version": self.model_version, "tags": self.tags}
