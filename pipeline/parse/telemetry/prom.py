"""Prometheus text exposition: DCGM exporter GPU samples and serving engines' metrics, one scrape or many.

A sample line is `name{label="value",...} value [timestamp_ms]` (the text format of
prometheus/common `expfmt`); `# HELP` / `# TYPE` and other comments are skipped. The DCGM exporter writes
`DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-...",pci_bus_id="...",device="nvidia0",modelName="NVIDIA H200",
Hostname="node-1",...} 1234` (NVIDIA/dcgm-exporter `internal/pkg/rendermetrics/render_metrics.go`, with
the framebuffer fields in MiB per `etc/default-counters.csv`), and on a MIG card `GPU_I_ID` / `GPU_I_PROFILE`
for the instance, `pod` / `namespace` / `container` under Kubernetes (some deployments spell the host label
`hostname`). Its 1.x predecessor (NVIDIA/gpu-monitoring-tools `dcgm-exporter`) wrote `dcgm_fb_used`,
`dcgm_gpu_temp`, ... with `uuid`, `pod_name`, `pod_namespace`, `container_name`. Engines: vLLM writes
`vllm:kv_cache_usage_perc{engine="0",model_name="..."} 0.42` (vllm `vllm/v1/metrics/loggers.py`), SGLang
`sglang:token_usage{model_name=...}` (`sglang_` when a gateway re-exposes them; its first versions labelled
the model `name`), TGI `tgi_queue_size`. Other metric families are not loaded, and neither are histogram
buckets (`_bucket`: their `_sum` and `_count` are).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from ...records import Reject
from ...units import UNIT_BYTES, epoch_to_datetime

# DCGM's metric name prefixes: the exporter's field names, and the 1.x exporter's.
PROMETHEUS = "prometheus"  # the kind of Prometheus (and OpenMetrics) text, a file's or a block's
DCGM_PREFIXES = ("DCGM_FI_", "dcgm_")
# An engine's metric name prefix -> the framework it names.
ENGINE_PREFIXES: dict[str, str] = {"vllm:": "vllm", "sglang:": "sglang", "sglang_": "sglang", "tgi_": "tgi"}
_PREFIXES = (*DCGM_PREFIXES, *ENGINE_PREFIXES)
RAW_LIMIT = 2000
# DCGM's blank sentinels (DCGM_INT64_BLANK and up, DCGM_FP64_BLANK): the field had no value.
INT64_BLANK = 0x7FFFFFFFFFFFFFF0
FP64_BLANK = 140737488355328.0

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^({_NAME})\s*(?:\{{(.*)\}})?\s+(\S+)(?:\s+(-?\d+(?:\.\d+)?))?\s*$")
# A sample's timestamp is milliseconds in Prometheus' text format and seconds (a fraction allowed) in
# OpenMetrics, which also ends in `# EOF` (what `promtool tsdb create-blocks-from openmetrics` reads). Any time a
# GPU log can carry (ingest/plausible.py: 2000 to 2100) is 9.5e8..4.1e9 in seconds and 9.5e11..4.1e12 in
# milliseconds: ranges a thousand times apart, so the number's size says which it is (units.epoch_to_datetime).
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_METRIC_LINE = re.compile(r"^(?:" + "|".join(re.escape(p) for p in _PREFIXES) + r")[\w:]+\s*[{ ]")


@dataclass(frozen=True, slots=True)
class Sample:
    """One exposition sample: metric name, labels, value and its timestamp (None when the line has none)."""

    line: int
    name: str
    labels: dict[str, str]
    value: float
    ts: datetime | None
    raw: str


@dataclass(frozen=True, slots=True)
class DcgmField:
    """A DCGM field that fills a gpu_samples column; `unit` converts its value (MiB to bytes)."""

    column: str
    unit: str = ""


# The DCGM fields oomlab keeps, as data (field names of `dcgm_fields.h`, as the exporter writes them).
DCGM_FIELDS: dict[str, DcgmField] = {
    "DCGM_FI_DEV_FB_USED": DcgmField("memory_used_bytes", "MiB"),
    "DCGM_FI_DEV_FB_FREE": DcgmField("memory_free_bytes", "MiB"),
    "DCGM_FI_DEV_FB_TOTAL": DcgmField("memory_total_bytes", "MiB"),
    "DCGM_FI_DEV_FB_RESERVED": DcgmField("memory_reserved_bytes", "MiB"),
    "DCGM_FI_DEV_GPU_UTIL": DcgmField("utilization_gpu"),
    "DCGM_FI_DEV_MEM_COPY_UTIL": DcgmField("utilization_memory"),
    "DCGM_FI_DEV_GPU_TEMP": DcgmField("temperature"),
    "DCGM_FI_DEV_POWER_USAGE": DcgmField("power_w"),
    # dcgm-exporter 1.x (gpu-monitoring-tools): the same fields under their old names
    "dcgm_fb_used": DcgmField("memory_used_bytes", "MiB"),
    "dcgm_fb_free": DcgmField("memory_free_bytes", "MiB"),
    "dcgm_gpu_utilization": DcgmField("utilization_gpu"),
    "dcgm_mem_copy_utilization": DcgmField("utilization_memory"),
    "dcgm_gpu_temp": DcgmField("temperature"),
    "dcgm_power_usage": DcgmField("power_w"),
}
# gpu_samples columns named by labels, each label's spellings in the order they are tried (current exporter,
# 1.x and lowercase deployments); an empty value (`pod=""` outside Kubernetes pods) is no value.
DCGM_LABELS: dict[str, tuple[str, ...]] = {
    "gpu_uuid": ("UUID", "uuid"),
    "gpu_bus_id": ("pci_bus_id",),
    "gpu_name": ("modelName",),
    "hostname": ("Hostname", "hostname"),
    "mig_profile": ("GPU_I_PROFILE",),
    "pod": ("pod", "pod_name"),
    "namespace": ("namespace", "pod_namespace"),
    "container": ("container", "container_name"),
}


def looks_like_prometheus(text: str) -> bool:
    """Whether the start of a file is Prometheus text with DCGM or engine metrics: most of its first non-blank
    lines are comments or samples (a bad line is a reject, not another kind of file), and one of them is
    (or describes) a `DCGM_FI_` / `dcgm_` / `vllm:` / `sglang:` / `sglang_` / `tgi_` metric."""
    lines = [line.strip() for line in text.splitlines()[:200] if line.strip()]
    head = lines[:20]
    if not head or sum(1 for line in head if line.startswith("#") or _SAMPLE.match(line)) < 0.8 * len(head):
        return False
    return any(_METRIC_LINE.match(line) or _describes(line) for line in lines)


def starts_exposition(lines: Sequence[str]) -> bool:
    """Whether a block of Prometheus text starts at lines[0]: a DCGM or engine sample, or its `# HELP` / `# TYPE`."""
    line = lines[0].strip()
    return bool(_METRIC_LINE.match(line) and _SAMPLE.match(line)) or _describes(line)


def exposition_line(line: str) -> bool:
    """A line of Prometheus text: a comment (`# HELP`, `# TYPE`, `# EOF`) or a sample."""
    stripped = line.strip()
    return stripped.startswith("#") or _SAMPLE.match(stripped) is not None


def _describes(line: str) -> bool:
    """A `# HELP` / `# TYPE` line of a DCGM or engine metric."""
    parts = line.split()
    return len(parts) >= 3 and parts[0] == "#" and parts[1] in ("HELP", "TYPE") and parts[2].startswith(_PREFIXES)


def read_samples(lines: Iterator[str], first_line: int = 1) -> Iterator[Sample | Reject]:
    """Every sample of the text as a Sample, or a Reject for a line that is not one."""
    for number, line in enumerate(lines, start=first_line):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        yield parse_sample(number, stripped)


def parse_sample(number: int, line: str) -> Sample | Reject:
    """One sample line, or a Reject saying what is wrong with it."""
    match = _SAMPLE.match(line)
    if match is None:
        return Reject(number, "not a Prometheus sample: expected `name{labels} value [timestamp]`", line[:RAW_LIMIT])
    labels = _labels(match[2] or "")
    if labels is None:
        return Reject(number, f"{match[1]}: malformed labels", line[:RAW_LIMIT])
    try:
        value = float(match[3])
    except ValueError:
        return Reject(number, f"{match[1]}: {match[3]!r} is not a number", line[:RAW_LIMIT])
    ts = _timestamp(match[4]) if match[4] else None
    return Sample(number, match[1], labels, value, ts, line[:RAW_LIMIT])


def _timestamp(text: str) -> datetime:
    """A sample's timestamp, in seconds (OpenMetrics) or milliseconds (Prometheus text) as its size says."""
    return epoch_to_datetime(float(text) if "." in text else int(text))


def _labels(text: str) -> dict[str, str] | None:
    """`a="1", b="x\\"y"` as a dict; None when the text is not a label list."""
    labels: dict[str, str] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            return None
        labels[match[1]] = re.sub(r"\\[\\\"n]", lambda m: _ESCAPES[m[0]], match[2])
        pos = match.end()
    return labels


def dcgm_value(sample: Sample, field: DcgmField) -> float | int | None:
    """The sample's value in its column's unit; raises ValueError for DCGM's blank sentinel or a non-finite value."""
    value = sample.value
    if value >= INT64_BLANK or value == FP64_BLANK:
        raise ValueError(f"{sample.name}: DCGM blank value (the field had no reading)")
    if not math.isfinite(value):
        raise ValueError(f"{sample.name}: {value} is not a finite number")
    if field.unit:
        return round(value * UNIT_BYTES[field.unit.lower()])
    return value


def label(labels: dict[str, str], spellings: tuple[str, ...]) -> str | None:
    """The first of a label's spellings the sample has with a value; None when none has one."""
    return next((labels[name] for name in spellings if labels.get(name)), None)


def engine_model(framework: str | None, labels: dict[str, str]) -> str | None:
    """The model an engine's sample names: `model_name`; SGLang's first metrics named it `name` (sgl-project/sglang
    PR 1853)."""
    return labels.get("model_name") or (labels.get("name") if framework == "sglang" else None)


def engine_framework(name: str) -> str | None:
    """The serving engine a metric name belongs to (`vllm`, `sglang`, `tgi`), or None."""
    return next((framework for prefix, framework in ENGINE_PREFIXES.items() if name.startswith(prefix)), None)
