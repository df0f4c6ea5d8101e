"""GPU tools' printed reports, told apart by their first lines: the `nvidia-smi` table, `nvidia-smi -q`,
`nvidia-smi dmon`, `dcgmi dmon` and rocm-smi; each read by its own module into gpu_samples (and, for the
table and -q, gpu_process_samples) rows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import tzinfo

from ...records import Reject
from .dmon import DCGMI_DMON, NVSMI_DMON, dmon_kind, read_dmon
from .nvsmi_query import NVSMI_QUERY, looks_like_nvsmi_query, read_nvsmi_query
from .nvsmi_table import NVSMI_TABLE, looks_like_nvsmi_table, read_nvsmi_table
from .rocm import ROCM_SMI, looks_like_rocm_smi, read_rocm_smi
from .values import TelemetryRow

# Each report kind and the `origin` its rows get (dcgmi is DCGM's own client).
REPORT_ORIGINS: dict[str, str] = {
    NVSMI_TABLE: "nvidia-smi",
    NVSMI_QUERY: "nvidia-smi",
    NVSMI_DMON: "nvidia-smi",
    DCGMI_DMON: "dcgm",
    ROCM_SMI: "rocm-smi",
}


def report_kind(text: str) -> str | None:
    """The kind of report the start of a file is, or None."""
    if looks_like_nvsmi_table(text):
        return NVSMI_TABLE
    if looks_like_nvsmi_query(text):
        return NVSMI_QUERY
    if looks_like_rocm_smi(text):
        return ROCM_SMI
    return dmon_kind(text)


def read_report(lines: Iterable[str], kind: str, zone: tzinfo | None) -> Iterator[TelemetryRow | Reject]:
    """The rows of a report of a known kind, and a Reject for each line that could not be read."""
    if kind == NVSMI_TABLE:
        return read_nvsmi_table(lines, zone)
    if kind == NVSMI_QUERY:
        return read_nvsmi_query(lines, zone)
    if kind == ROCM_SMI:
        return read_rocm_smi(lines)
    return read_dmon(lines, kind, zone)
