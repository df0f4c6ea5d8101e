"""The reports GPU tools print, read from real copies: the nvidia-smi table, `nvidia-smi -q`, `nvidia-smi dmon`,
`dcgmi dmon` and rocm-smi.

The H200 ones are tests/data/h200/env (see its README); the others are artifacts of the real-world corpus,
tests/cases/realworld/telemetry, each copied from the page its case.json names:
- 001 https://github.com/utkuozdemir/nvidia_gpu_exporter/blob/e656cd81a180e7e0e7862b53c9acd4c2fb0f590b/internal/captures/linux-x86_64__nvidia-h100-mig__590.48.01.txt
- 004 https://github.com/utkuozdemir/nvidia_gpu_exporter/blob/e656cd81a180e7e0e7862b53c9acd4c2fb0f590b/internal/captures/windows-x86_64__nvidia-geforce-rtx-2080-super__610.62.txt
- 007 https://github.com/mxochicale/code/blob/44010376aeb698dd8161940cd5468f0142a94c90/gpu/nvidia/LOGS.md
- 009 https://github.com/hershey890/cs259/blob/010e45a232d6b5f84f3c0607c04d6f3f542f773f/README.md
- 015 https://github.com/NVIDIA/DCGM/issues/152
- 027 https://github.com/utkuozdemir/nvidia_gpu_exporter/blob/e656cd81a180e7e0e7862b53c9acd4c2fb0f590b/internal/captures/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt
- 028 https://github.com/utkuozdemir/nvidia_gpu_exporter/blob/e656cd81a180e7e0e7862b53c9acd4c2fb0f590b/internal/captures/windows-x86_64__nvidia-geforce-rtx-2080-super__591.86.txt
- 031 https://github.com/liguodongiot/llm-action/blob/923449432b6bd00674efd5965fdb70365a88ce5e/docs/llm-base/nvidia-smi.md
- 033 https://github.com/mikaku/Monitorix/issues/28
- 041 https://github.com/liguodongiot/llm-action/blob/923449432b6bd00674efd5965fdb70365a88ce5e/docs/llm-base/dcgmi.md
- 049 https://github.com/ROCm/legacy-rocm-build/issues/1909
- 050 https://github.com/ROCm/ROC-smi/issues/90
- 051 https://github.com/liguodongiot/llm-action/blob/923449432b6bd00674efd5965fdb70365a88ce5e/docs/llm-base/nvidia-smi-dmon.md
- oom 068 (an OOM message with an nvidia-smi table pasted after it), its case.json's source
The `nvidia-smi -q` of a MIG H100 below is an excerpt (whole sections, cut between them) of lines 1937-2299 of
https://github.com/utkuozdemir/nvidia_gpu_exporter/blob/e656cd81a180e7e0e7862b53c9acd4c2fb0f590b/internal/captures/linux-x86_64__nvidia-h100-mig__590.48.01.txt
"""

from __future__ import annotations

import gzip
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from oomlab.parse.detect import detect_kind
from oomlab.parse.telemetry.dmon import DCGMI_DMON, NVSMI_DMON, read_dmon
from oomlab.parse.telemetry.nvsmi_query import read_nvsmi_query
from oomlab.parse.telemetry.nvsmi_table import read_nvsmi_table
from oomlab.parse.telemetry.rocm import read_rocm_smi
from oomlab.parse.telemetry.values import GPU_SAMPLES, PROCESS_SAMPLES, TelemetryRow
from oomlab.records import Reject

from conftest import H200, ROOT

CORPUS = ROOT / "tests" / "cases" / "realworld"
ENV = H200 / "env"
MIB = 1 << 20
MIG_QUERY = """==============NVSMI LOG==============

Timestamp                                              : Tue Jul 14 09:00:44 2026
Driver Version                                         : 590.48.01
CUDA Version                                           : 13.1

Attached GPUs                                          : 1
GPU 00000000:00:09.0
    MIG Mode
        Current                                        : Enabled
        Pending                                        : Enabled
    MIG Device
        Index                                          : 0
        GPU Instance ID                                : 2
        Compute Instance ID                            : 0
        Device Attributes
            Shared
                Multiprocessor count                   : 60
                Copy Engine count                      : 3
                Encoder count                          : 0
                Decoder count                          : 3
                OFA count                              : 0
                JPG count                              : 3
        ECC Errors
            Volatile
                SRAM Uncorrectable                     : 0
        Shared FB Memory Usage
            Total                                      : 40448 MiB
            Reserved                                   : 0 MiB
            Used                                       : 11091 MiB
            Free                                       : 29357 MiB
        Shared BAR1 Memory
            Total                                      : 24739 MiB
            Used                                       : 0 MiB
            Free                                       : 24739 MiB
    FB Memory Usage
        Total                                          : 81559 MiB
        Reserved                                       : 479 MiB
        Used                                           : 11125 MiB
        Free                                           : 69956 MiB
    BAR1 Memory Usage
    Processes
        GPU instance ID                   : 2
        Compute instance ID               : 0
        Process ID                        : 21180
            Type                          : C
            Name                          : /root/tools/memhog
            Used GPU Memory               : 2296 MiB
"""


def _artifact(case: str) -> Path:
    (path,) = (CORPUS / "telemetry").glob(f"{case}_*/artifact.*")
    return path


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def _rows(items: list[TelemetryRow | Reject], table: str) -> list[dict[str, object]]:
    return [i.row for i in items if isinstance(i, TelemetryRow) and i.table == table]


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (ENV / "nvidia-smi_run2.txt.gz", "nvsmi_table"),
        (_artifact("009"), "nvsmi_table"),  # no date line: the border comes first
        (ENV / "nvidia-smi-q-memory_run2.txt.gz", "nvsmi_query"),
        (_artifact("051"), "nvsmi_dmon"),
        (_artifact("041"), "dcgmi_dmon"),
        (_artifact("049"), "rocm_smi"),
        (_artifact("050"), "rocm_smi"),
        (_artifact("030"), "text"),  # the tail of a -q report: no NVSMI LOG line, nothing to tell it by
    ],
)
def test_kinds(path: Path, kind: str) -> None:
    assert detect_kind(path) == kind


def test_a_log_with_a_table_pasted_after_its_oom_stays_a_text_log() -> None:
    (path,) = (CORPUS / "oom").glob("068_*/artifact.*")
    assert detect_kind(path) == "text"


def test_a_log_that_begins_with_a_table_stays_a_text_log(tmp_path) -> None:
    # `nvidia-smi && python serve.py`: the H200's table, then serve_mixed's OOM messages
    messages = gzip.decompress((H200 / "serve_mixed" / "oom_messages.txt.gz").read_bytes()).decode()
    path = tmp_path / "job.log"
    path.write_text("\n".join(_lines(ENV / "nvidia-smi_run2.txt.gz")) + "\n" + messages)
    assert detect_kind(path) == "text"


def test_the_h200_table() -> None:
    items = list(read_nvsmi_table(_lines(ENV / "nvidia-smi_run2.txt.gz"), None))
    assert items == [
        TelemetryRow(
            GPU_SAMPLES,
            {
                "line": 9,
                "ts": datetime(2026, 11, 30, 1, 49, 4),
                "gpu_index": 0,
                "gpu_name": "NVIDIA H200",
                "gpu_bus_id": "00000000:00:06.0",
                "temperature": 37.0,
                "power_w": 81.0,
                "memory_used_bytes": 0,
                "memory_total_bytes": 143771 * MIB,
                "utilization_gpu": 0.0,
            },
        )
    ]  # `No running processes found`: no process row


def test_the_date_line_is_the_hosts_clock() -> None:
    items = list(read_nvsmi_table(_lines(ENV / "nvidia-smi_run2.txt.gz"), ZoneInfo("Asia/Shanghai")))
    assert _rows(items, GPU_SAMPLES)[0]["ts"] == datetime(2026, 11, 29, 17, 49, 4)


def test_a_mig_card_its_instances_and_their_processes() -> None:
    items = list(read_nvsmi_table(_lines(_artifact("001")), None))
    gpus = _rows(items, GPU_SAMPLES)
    assert [(g["line"], g.get("mig_instance_id"), g["memory_used_bytes"], g["memory_total_bytes"]) for g in gpus] == [
        (9, None, 11125 * MIB, 81559 * MIB),  # the card; GPU-Util is N/A under MIG
        (21, 2, 11091 * MIB, 40448 * MIB),
        (24, 3, 17 * MIB, 20096 * MIB),
        (27, 9, 9 * MIB, 9984 * MIB),
        (30, 10, 9 * MIB, 9984 * MIB),
    ]
    assert gpus[0]["utilization_gpu"] is None and gpus[0]["power_w"] == 432.0
    processes = _rows(items, PROCESS_SAMPLES)
    assert [
        (p["pid"], p["gpu_index"], p["mig_instance_id"], p["process_name"], p["used_bytes"]) for p in processes
    ] == [
        (21180, 0, 2, "/root/tools/memhog", 2296 * MIB),
        (21181, 0, 2, "/root/tools/memhog", 1272 * MIB),
        (21198, 0, 2, "./gpu_burn", 7484 * MIB),
    ]


def test_the_pre_mig_process_layout() -> None:
    processes = _rows(list(read_nvsmi_table(_lines(_artifact("007")), None)), PROCESS_SAMPLES)
    assert [(p["gpu_index"], p["pid"], p["process_name"], p["used_bytes"]) for p in processes] == [
        (0, 1357, "/usr/lib/xorg/Xorg", 18 * MIB),
        (0, 1417, "/usr/bin/gnome-shell", 49 * MIB),
        (0, 1811, "/usr/lib/xorg/Xorg", 96 * MIB),
        (0, 1968, "/usr/bin/gnome-shell", 77 * MIB),
    ]


def test_windows_processes_have_no_memory_and_names_cut_short_stay_as_printed() -> None:
    items = list(read_nvsmi_table(_lines(_artifact("004")), None))
    (gpu,) = _rows(items, GPU_SAMPLES)
    assert gpu["gpu_name"] == "NVIDIA GeForce RTX 2080 ..." and gpu["memory_used_bytes"] == 1366 * MIB
    processes = _rows(items, PROCESS_SAMPLES)
    assert len(processes) == 21 and {p["used_bytes"] for p in processes} == {None}
    assert processes[9]["process_name"] == "...y\\StartMenuExperienceHost.exe"


def test_a_table_without_its_date_line_and_a_redacted_one() -> None:
    (untimed,) = _rows(list(read_nvsmi_table(_lines(_artifact("009")), None)), GPU_SAMPLES)
    assert untimed["ts"] is None and untimed["memory_used_bytes"] == 1029 * MIB
    # the poster shortened the bus id to `00000000:` and the MIG card shows its memory as N/A
    (redacted,) = _rows(list(read_nvsmi_table(_lines(_artifact("015")), None)), GPU_SAMPLES)
    assert (redacted["gpu_index"], redacted["gpu_bus_id"], redacted["memory_used_bytes"]) == (3, None, None)
    assert redacted["temperature"] == 33.0


def test_a_gpu_line_not_understood_is_a_reject_and_the_rest_reads() -> None:
    lines = _lines(_artifact("001"))
    lines[9] = lines[9].replace("11125MiB /  81559MiB", "11125MiB /  lots     ")
    items = list(read_nvsmi_table(lines, None))
    rejects = [i for i in items if isinstance(i, Reject)]
    assert [(r.line, r.reason) for r in rejects] == [
        (10, "nvidia-smi table: Memory-Usage '11125MiB /  lots' is not `used / total`")
    ]
    assert len(_rows(items, GPU_SAMPLES)) == 4 and len(_rows(items, PROCESS_SAMPLES)) == 3


def test_the_query_report_and_its_processes() -> None:
    items = list(read_nvsmi_query(_lines(_artifact("027")), None))
    (gpu,) = _rows(items, GPU_SAMPLES)
    assert gpu == {
        "line": 8,
        "ts": datetime(2026, 7, 14, 8, 12, 53),
        "gpu_index": 0,  # `Attached GPUs : 1`, and one listed
        "gpu_bus_id": "00000000:00:09.0",
        "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "memory_total_bytes": 81559 * MIB,  # `FB Memory Usage`, not BAR1's 131072 MiB
        "memory_reserved_bytes": 479 * MIB,
        "memory_used_bytes": 19818 * MIB,
        "memory_free_bytes": 61263 * MIB,
        "utilization_gpu": 100.0,
        "utilization_memory": 11.0,
        "temperature": 59.0,
        "power_w": 629.45,  # `Average Power Draw` of GPU Power Readings, not the memory's 85.83 W
    }
    processes = _rows(items, PROCESS_SAMPLES)
    assert [(p["line"], p["pid"], p["process_name"], p["used_bytes"]) for p in processes] == [
        (254, 11327, "/root/tools/memhog", 2566 * MIB),
        (260, 11328, "/root/tools/memhog", 1542 * MIB),
        (266, 11345, "./gpu_burn", 15690 * MIB),
    ]


def test_wddm_process_memory_and_a_report_of_one_gpu_of_eight() -> None:
    processes = _rows(list(read_nvsmi_query(_lines(_artifact("028")), None)), PROCESS_SAMPLES)
    assert len(processes) == 12 and {p["used_bytes"] for p in processes} == {None}  # Not available in WDDM ...
    # `nvidia-smi -q -i 0` of a host with 8 GPUs: the report alone does not say which index it is
    (gpu,) = _rows(list(read_nvsmi_query(_lines(_artifact("031")), None)), GPU_SAMPLES)
    assert gpu["gpu_index"] is None and gpu["power_w"] == 74.71 and gpu["memory_free_bytes"] == 81042 * MIB


def test_old_drivers_and_the_memory_only_report() -> None:
    (old,) = _rows(list(read_nvsmi_query(_lines(_artifact("033")), None)), GPU_SAMPLES)
    assert (old["gpu_bus_id"], old["temperature"], old["ts"]) == (
        "0000:01:05.0",
        49.0,
        datetime(2013, 10, 10, 8, 12, 46),
    )
    (memory,) = _rows(list(read_nvsmi_query(_lines(ENV / "nvidia-smi-q-memory_run1.txt.gz"), None)), GPU_SAMPLES)
    assert (memory["memory_total_bytes"], memory["memory_free_bytes"]) == (143771 * MIB, 143156 * MIB)


def test_nvidia_smi_dmon() -> None:
    items = list(read_dmon(_lines(_artifact("051")), NVSMI_DMON, None))
    assert len(items) == 24
    assert items[8] == TelemetryRow(
        GPU_SAMPLES,
        {"line": 11, "ts": None, "gpu_index": 0, "power_w": 191.0, "temperature": 45.0, "utilization_memory": 3.0},
    )


def test_dcgmi_dmon_with_no_column_oomlab_keeps_makes_no_row() -> None:
    assert list(read_dmon(_lines(_artifact("041")), DCGMI_DMON, None)) == []


def test_rocm_smi() -> None:
    assert list(read_rocm_smi(_lines(_artifact("049")))) == [
        TelemetryRow(
            GPU_SAMPLES,
            {"line": 3, "ts": None, "gpu_index": 0, "memory_total_bytes": 4278190080, "memory_used_bytes": 108814336},
        )
    ]
    (row,) = _rows(list(read_rocm_smi(_lines(_artifact("050")))), GPU_SAMPLES)
    assert row == {"line": 4, "ts": None, "gpu_index": 1, "temperature": 25.0, "power_w": 10.0, "utilization_gpu": 0.0}


def test_a_mig_cards_query_report() -> None:
    # driver 590 prints each `MIG Device` right under its GPU, with `Shared FB Memory Usage`
    items = list(read_nvsmi_query(MIG_QUERY.splitlines(), None))
    gpus = _rows(items, GPU_SAMPLES)
    assert [(g["line"], g.get("mig_instance_id"), g["memory_used_bytes"], g["memory_total_bytes"]) for g in gpus] == [
        (8, None, 11125 * MIB, 81559 * MIB),  # the card's own FB Memory Usage, after its MIG devices
        (12, 2, 11091 * MIB, 40448 * MIB),
    ]
    (process,) = _rows(items, PROCESS_SAMPLES)
    assert (process["pid"], process["mig_instance_id"], process["used_bytes"]) == (21180, 2, 2296 * MIB)


def test_one_gpus_section_pasted_without_the_report_banner(tmp_path) -> None:
    """Derived from pasted_tables/016 (nomad-device-nvidia#87): its second fence, a GH200's `-q` section with no
    `NVSMI LOG` banner, saved alone. The section's title (`GPU` and the PCI bus id) over an indented line of it
    says what it is; the GPU is read with no time and no index (the report's GPU count is not there)."""
    (artifact,) = (CORPUS / "pasted_tables").glob("016_*/artifact.*")
    lines = artifact.read_text().splitlines()
    start = lines.index("GPU 00000000:DD:00.0")
    section = lines[start : lines.index("```", start)]
    path = tmp_path / "gh200-q.txt"
    path.write_text("\n".join(section) + "\n")
    assert detect_kind(path) == "nvsmi_query"
    (gpu,) = _rows(list(read_nvsmi_query(section, None)), GPU_SAMPLES)
    assert gpu["gpu_bus_id"] == "00000000:DD:00.0" and gpu["gpu_name"] == "NVIDIA GH200 480GB"
    assert gpu["ts"] is None and gpu["gpu_index"] is None
