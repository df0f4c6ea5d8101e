"""Which instance a telemetry file is of, when neither --instance nor the file itself names its host.

Request logs and telemetry of one host are usually named after it (`a10-01.jsonl.gz`, `a10-01.gpu.csv.gz`:
instance `a10-01`, the file name up to its first dot). Telemetry saved under the tool's or the content's
name instead (`nvsmi_gpu_run1.csv`, `nvsmi_apps_run1.csv`, `nvidia-smi.txt`, `metrics.prom`) names no host,
and two such files of one host would become two instances: they take their folder's name, as the
allocator printouts do (config.IngestOptions.instance_for).
"""

from __future__ import annotations

import re
from pathlib import Path

from ...config import instance_from_filename

# Words of such file names: tools, what they print, and how people number their captures.
_TOOL_WORDS = frozenset(
    {
        "nvsmi",
        "nvidia",
        "smi",
        "q",
        "query",
        "gpu",
        "gpus",
        "apps",
        "compute",
        "process",
        "processes",
        "memory",
        "dmon",
        "dcgm",
        "dcgmi",
        "exporter",
        "rocm",
        "metrics",
        "prometheus",
        "prom",
        "scrape",
        "telemetry",
        "samples",
    }
)
_CAPTURE_NUMBER = re.compile(r"^(?:run|r|part)?\d+$")
_SEPARATORS = re.compile(r"[-_\s]+")


def names_no_host(stem: str) -> bool:
    """Whether a file name (without extensions) is made only of tool words and capture numbers."""
    words = [w for w in _SEPARATORS.split(stem.lower()) if w]
    return (
        bool(words)
        and all(w in _TOOL_WORDS or _CAPTURE_NUMBER.match(w) for w in words)
        and not all(_CAPTURE_NUMBER.match(w) for w in words)
    )


def file_instance(path: str | Path) -> str:
    """The instance a telemetry file's name gives: its folder's name when the name names no host, else the
    name up to its first dot."""
    stem = instance_from_filename(path)
    folder = Path(path).resolve().parent.name
    return folder if folder and names_no_host(stem) else stem
