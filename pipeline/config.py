"""Options shared by the stages of one ingest."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .fields import FIELDS, Field

# Files people save torch.cuda.memory_summary() / memory_stats() printouts in are named after the function.
ALLOCATOR_PRINTOUTS = ("memory_summary", "memory_stats")
# An IPv4 address at the start of a file name, and the rest of the name up to its next dot.
_IPV4_NAME = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}(?!\d)[^.]*")


def instance_from_filename(path: str | Path) -> str:
    """`gpu-a-0.log.gz` -> `gpu-a-0`: the file name up to its first dot (`gpu-a-0.snapshot_end.pickle.gz` is
    gpu-a-0's too). A name that opens with an IPv4 address keeps it whole: per-node logs named for the node's
    address (`10.0.3.17.log`, `10.0.3.18.log`) are two hosts, not one called `10`."""
    name = Path(path).name
    address = _IPV4_NAME.match(name)
    return address[0] if address else name.split(".", 1)[0]


@dataclass(frozen=True)
class IngestOptions:
    """Labels, field mapping and time zone for one `oomlab ingest` call."""

    instance: str | None = None
    model_version: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    tz: str | None = None
    fields: tuple[Field, ...] = FIELDS
    at: datetime | None = None  # --at: when a printout or scrape without a time of its own was taken (naive UTC)
    columns: tuple[str, ...] = ()  # --columns: the field names of nvidia-smi CSVs written with `noheader`
    many_files: bool = False  # --many-files: read more than ingest.paths.MANY_FILES files one by one anyway
    # --job-duration: how long a run of a crontab's, CronJob's or timer's job lasts where the file does not bound it
    job_duration_minutes: float | None = None

    def instance_for(self, path: str | Path) -> str:
        """The instance label of a file: --instance, else its file name; a file named for PyTorch's
        `memory_summary` / `memory_stats` is named for the moment it was printed at, not for a host, so its
        folder names the process it belongs to."""
        if self.instance:
            return self.instance
        name = instance_from_filename(path)
        if name.startswith(ALLOCATOR_PRINTOUTS) and Path(path).resolve().parent.name:
            return Path(path).resolve().parent.name
        return name

    def labels_for(self, path: str | Path) -> dict[str, object]:
        """What `sources.labels` records for a file: its labels, and the field names given for a header-less CSV
        (`--columns`), so that a file refused without them is read again with them."""
        labels: dict[str, object] = {"instance": self.instance_for(path), "model_version": self.model_version}
        labels["tags"] = self.tags
        if self.columns:
            labels["columns"] = list(self.columns)
        if self.job_duration_minutes is not None:
            labels["job_duration_minutes"] = self.job_duration_minutes
        return labels
