"""`nvidia-smi pmon` (parse/telemetry/pmon.py), read from real artifacts of tests/cases/realworld/telemetry/ (each
copied from the URL its case.json names): told from dmon, whose header also names `gpu` over `Idx`, and read
into gpu_process_samples with the `fb` column's MiB."""

from __future__ import annotations

from oomlab.parse.detect import detect_kind
from oomlab.parse.telemetry.pmon import NVSMI_PMON, read_pmon
from oomlab.parse.telemetry.values import PROCESS_SAMPLES

from conftest import ROOT

TELEMETRY = ROOT / "tests" / "cases" / "realworld" / "telemetry"


def _artifact(number: str):
    (path,) = TELEMETRY.glob(f"{number}_*/artifact.txt")
    return path


def test_a_pmon_file_is_pmon_not_dmon() -> None:
    assert detect_kind(_artifact("061")) == NVSMI_PMON  # `$ nvidia-smi pmon -c 1 -s mu`, then its headers


def test_fb_is_the_process_memory_and_idle_lines_are_no_rows() -> None:
    """061 prints the `-s u` header, then the `-s mu` one with `fb`: the last header read names the columns."""
    rows = list(read_pmon(_artifact("061").read_text().splitlines(), None))
    assert all(row.table == PROCESS_SAMPLES for row in rows)
    first = rows[0].row
    assert (first["line"], first["gpu_index"], first["pid"]) == (6, 0, 447153)
    assert first["used_bytes"] == 7669 << 20 and first["process_name"] == "python3.9"
    assert [row.row["pid"] for row in rows if row.row["gpu_index"] == 1] == [1864615, 2233095]
