"""The samples of one Prometheus file sorted into their tables: DCGM fields of one GPU, MIG instance and pod at
one moment make one gpu_samples row; every engine metric sample is an engine_samples row.

A sample without a timestamp is one of a single scrape saved to the file: it takes `at` (--at), else no time
(None); a series repeated without timestamps is rejected, since several scrapes need them. The instance is
the one given (--instance), else the sample's host label; None leaves it to the caller (the file's name).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from ...records import Reject
from .memory import impossible_memory
from .prom import DCGM_FIELDS, DCGM_LABELS, Sample, dcgm_value, engine_framework, engine_model, label
from .values import GPU_SAMPLES, TelemetryRow

ENGINE_SAMPLES = "engine_samples"
# What tells one DCGM row from another at one moment besides the host: the GPU, its MIG instance (several
# instances of one card report the same `gpu`), and the pod (MPS or time-sliced pods share a card).
_ROW_KEY = ("gpu", "UUID", "uuid", "GPU_I_ID", "pod", "pod_name", "namespace", "pod_namespace", "container")


@dataclass
class Scrape:
    """Samples of one file, sorted into their tables."""

    at: datetime | None = None
    instance: str | None = None
    gpus: dict[tuple, dict[str, object]] = field(default_factory=dict)
    engine: list[dict[str, object]] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    _untimed: set[tuple] = field(default_factory=set)
    _fields: dict[tuple, dict[str, str]] = field(default_factory=dict)  # per row: column -> the metric that set it

    def read(self, items: Iterable[Sample | Reject]) -> Scrape:
        for item in items:
            self.take(item)
        return self

    def take(self, item: Sample | Reject) -> None:
        """File one sample (or reject) where it belongs; other metric families are not loaded."""
        if isinstance(item, Reject):
            self.rejects.append(item)
        elif item.name in DCGM_FIELDS:
            self._dcgm(item)
        elif engine_framework(item.name) and not item.name.endswith("_bucket"):
            self._engine(item)

    def rows(self) -> list[TelemetryRow]:
        """The GPU rows, less those whose memory no card can show (each a reject at the line of its first
        field: DCGM's fields of one GPU and moment are only complete once the whole file is read), then the
        engine rows."""
        kept = []
        for key, row in self.gpus.items():
            reason = impossible_memory(row, self._fields[key])
            if reason is None:
                kept.append(TelemetryRow(GPU_SAMPLES, row))
            else:
                self.rejects.append(Reject(row["line"], reason, json.dumps(row, default=str)))  # type: ignore[arg-type]
        return kept + [TelemetryRow(ENGINE_SAMPLES, row) for row in self.engine]

    def _ts(self, sample: Sample) -> tuple[bool, datetime | None]:
        """(whether the sample is kept, its time)."""
        if sample.ts is not None:
            return True, sample.ts
        series = (sample.name, tuple(sorted(sample.labels.items())))
        if series in self._untimed:
            reason = (
                f"{sample.name}: series repeated without a timestamp (several scrapes in one file need sample "
                "timestamps)"
            )
            self.rejects.append(Reject(sample.line, reason, sample.raw))
            return False, None
        self._untimed.add(series)
        return True, self.at

    def _instance(self, labels: dict[str, str]) -> str | None:
        return self.instance or label(labels, DCGM_LABELS["hostname"])

    def _dcgm(self, sample: Sample) -> None:
        """A DCGM field: one column of its GPU's row at that moment."""
        gpu = sample.labels.get("gpu", "")
        if not gpu.isdigit():
            self.rejects.append(Reject(sample.line, f"{sample.name}: no gpu index label", sample.raw))
            return
        try:
            value = dcgm_value(sample, DCGM_FIELDS[sample.name])
        except ValueError as exc:
            self.rejects.append(Reject(sample.line, str(exc), sample.raw))
            return
        kept, ts = self._ts(sample)
        if not kept:
            return
        instance = self._instance(sample.labels)
        key = (ts, instance, *(sample.labels.get(k) for k in _ROW_KEY))
        row = self.gpus.get(key)
        if row is None:
            row = self.gpus[key] = self._gpu_row(sample, ts, instance, int(gpu))
        column = DCGM_FIELDS[sample.name].column
        row[column] = value
        self._fields.setdefault(key, {})[column] = sample.name

    def _gpu_row(self, sample: Sample, ts: datetime | None, instance: str | None, gpu: int) -> dict[str, object]:
        labels = sample.labels
        instance_id = labels.get("GPU_I_ID", "")
        row: dict[str, object] = {column: label(labels, spellings) for column, spellings in DCGM_LABELS.items()}
        return row | {
            "line": sample.line,
            "ts": ts,
            "instance": instance,
            "gpu_index": gpu,
            "mig_instance_id": int(instance_id) if instance_id.isdigit() else None,
        }

    def _engine(self, sample: Sample) -> None:
        """An engine metric sample, with all its labels."""
        kept, ts = self._ts(sample)
        if not kept:
            return
        framework = engine_framework(sample.name)
        model = engine_model(framework, sample.labels)
        self.engine.append(
            {
                "line": sample.line,
                "ts": ts,
                "instance": self._instance(sample.labels),
                "framework": framework,
                "model_name": model,
                "metric": sample.name,
                "value": sample.value,
                "labels": json.dumps(sample.labels, sort_keys=True),
            }
        )
