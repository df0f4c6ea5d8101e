"""nvidia-smi query CSVs: the real H200 samples (tests/data/h200/env, see its README) load to the byte, and bad
lines become one-line rejects while the rest loads. A query without `timestamp` loads samples without a time;
`noheader` is read where the values tell the fields. The no-timestamp and noheader files are real ones of the
corpus (tests/cases/realworld/telemetry): 018 from https://github.com/aristocratos/bpytop/issues/26, 019 from
https://github.com/enkore/i3pystatus/pull/776."""

from __future__ import annotations

import gzip
from datetime import datetime

import pytest

from oomlab.parse.detect import detect_kind

from conftest import H200

ENV = H200 / "env"
MIB = 1 << 20


def _rows(name: str) -> list[list[str]]:
    """The data rows of one real CSV, split as nvidia-smi writes them (`, ` between fields)."""
    with gzip.open(ENV / name, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n").split(", ") for line in list(handle)[1:]]


def _mib(value: str) -> int:
    assert value.endswith(" MiB")
    return int(value[:-4]) * MIB


@pytest.fixture
def run2(db, run_cli):
    """Run 2's GPU and compute-apps samples, labelled as serve_mixed's instance."""
    result = run_cli(
        "ingest", ENV / "nvsmi_gpu_run2.csv.gz", ENV / "nvsmi_apps_run2.csv.gz", "--instance", "gpu-b-1", "--db", db
    )
    assert result.exit_code == 0, result.output
    return result


def test_kinds_are_told_by_the_header() -> None:
    assert detect_kind(ENV / "nvsmi_gpu_run1.csv.gz") == "nvsmi_gpu"
    assert detect_kind(ENV / "nvsmi_apps_run2.csv.gz") == "nvsmi_apps"
    assert detect_kind(ENV / "nvidia-smi_run1.txt.gz") == "nvsmi_table"  # the table plain `nvidia-smi` prints
    assert detect_kind(ENV / "nvidia-smi-q-memory_run1.txt.gz") == "nvsmi_query"


def test_gpu_samples_to_the_byte(run2, sql) -> None:
    rows = _rows("nvsmi_gpu_run2.csv.gz")
    assert sql("SELECT count(*), min(line), max(line) FROM gpu_samples") == [(len(rows), 2, len(rows) + 1)]
    # the card: 143771 MiB total (README), named as nvidia-smi names it, one GPU
    assert sql("SELECT DISTINCT memory_total_bytes, gpu_name, gpu_index, instance, origin FROM gpu_samples") == [
        (143771 * MIB, "NVIDIA H200", 0, "gpu-b-1", "nvidia-smi")
    ]
    top = max(_mib(r[3]) for r in rows)
    assert top == 143137 * MIB  # the run's highest memory.used, with the neighbour and serve_mixed at once
    assert sql("SELECT max(memory_used_bytes) FROM gpu_samples") == [(top,)]
    first = rows[0]
    assert sql(
        "SELECT ts, memory_used_bytes, memory_free_bytes, utilization_gpu, temperature, power_w "
        "FROM gpu_samples WHERE line = 2"
    ) == [(datetime(2026, 11, 30, 1, 49, 9, 1000), 0, 143156 * MIB, 0.0, 37.0, float(first[9][:-2]))]


def test_free_memory_agrees_with_the_oom_message(run2, sql) -> None:
    # serve_mixed's first OOM (01:50:03.302) says `281.56 MiB is free`; the next sample, 0.24 s later, 282 MiB
    after = sql(
        "SELECT ts, memory_free_bytes FROM gpu_samples WHERE ts >= '2026-11-30 01:50:03.302' ORDER BY ts LIMIT 1"
    )
    assert after == [(datetime(2026, 11, 30, 1, 50, 3, 541000), 282 * MIB)]
    assert abs(after[0][1] - 281.56 * MIB) < MIB


def test_process_samples_name_the_neighbour(run2, sql) -> None:
    rows = _rows("nvsmi_apps_run2.csv.gz")
    assert sql("SELECT count(*) FROM gpu_process_samples") == [(len(rows),)]
    pids = {(int(r[1]), r[2]) for r in rows if r[2] != "[No data]"}
    assert set(sql("SELECT DISTINCT pid, process_name FROM gpu_process_samples WHERE process_name IS NOT NULL")) == pids
    assert (1030, "/opt/torch/.venv/bin/python3") in pids and (1009, "python3") in pids
    # the neighbour of serve_mixed's OOM messages (`Process 1030 has 135.29 GiB memory in use`)
    held = sql("SELECT DISTINCT used_bytes FROM gpu_process_samples WHERE pid = 1030")
    assert held == [(138540 * MIB,)] and round(held[0][0] / (1 << 30), 2) == 135.29
    # a process gone between listing and reading: `[No data]` as its name (line 22), its memory still read
    assert sql("SELECT pid, process_name, used_bytes FROM gpu_process_samples WHERE line = 22") == [
        (951, None, 5816 * MIB)
    ]
    # every process of one sampling round carries the round's timestamp
    assert sql("SELECT pid, used_bytes FROM gpu_process_samples WHERE ts = '2026-11-30 01:50:03.035' ORDER BY pid") == [
        (1009, 4096 * MIB),
        (1030, 138540 * MIB),
    ]


def test_run1_and_the_summary(db, run_cli, sql, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one table row per source
    result = run_cli("ingest", ENV, "--db", db)
    assert result.exit_code == 0, result.output
    for name, kind, rows in (
        ("nvsmi_gpu_run1.", "nvsmi_gpu", 435),
        ("nvsmi_apps_run1.", "nvsmi_apps", 204),
        ("nvsmi_gpu_run2.", "nvsmi_gpu", 398),
        ("nvsmi_apps_run2.", "nvsmi_apps", 203),
        ("nvidia-smi_run1.", "nvsmi_table", 1),  # one GPU, no process running yet
        ("nvidia-smi-q-memory_run2.", "nvsmi_query", 1),
    ):
        line = next(x for x in result.stdout.splitlines() if f"/{name}" in x)
        assert kind in line and f" {rows} " in line
    # the files are named after the tool, not the host: the GPU and compute-apps samples of one host are one
    # instance, their folder's (not `nvsmi_gpu_run1` and `nvsmi_apps_run1`)
    assert sql("SELECT DISTINCT instance FROM gpu_samples UNION SELECT DISTINCT instance FROM gpu_process_samples") == [
        ("env",)
    ]
    assert sql("SELECT max(memory_used_bytes) FROM gpu_samples") == [(143137 * MIB,)]
    assert sql("SELECT kind, sum(rows) FROM sources GROUP BY 1 ORDER BY 1") == [
        ("nvsmi_apps", 407),
        ("nvsmi_gpu", 833),
        ("nvsmi_query", 2),
        ("nvsmi_table", 2),
        ("text", 0),
    ]


def test_local_time_zone(db, run_cli, sql) -> None:
    assert run_cli("ingest", ENV / "nvsmi_gpu_run2.csv.gz", "--tz", "Asia/Shanghai", "--db", db).exit_code == 0
    assert sql("SELECT ts FROM gpu_samples WHERE line = 2") == [(datetime(2026, 11, 29, 17, 49, 9, 1000),)]


HEADER = (
    "timestamp, index, name, memory.used [MiB], memory.total [MiB], memory.free [MiB], "
    "utilization.gpu [%], utilization.memory [%], temperature.gpu, power.draw [W]"
)


def test_bad_lines_are_rejected_and_the_rest_loads(tmp_path, db, run_cli, sql) -> None:
    good = "2026/11/30 01:50:03.541, 0, NVIDIA H200, 142875 MiB, 143771 MiB, 282 MiB, 27 %, 10 %, 42, 167.52 W"
    path = tmp_path / "node-7.csv"
    path.write_text(
        "\n".join(
            [
                HEADER,
                good,  # 2
                "2026/11/30 01:50:04.041, 0, NVIDIA H200, 142877 MiB, 143771 MiB",  # 3: cut short
                good.replace("142875 MiB", "lots MiB"),  # 4
                good.replace("2026/11/30 01:50:03.541", "yesterday"),  # 5
                good.replace("142875 MiB", "142875 furlongs"),  # 6
                good.replace(" 0, NVIDIA", " x, NVIDIA"),  # 7
                good.replace("27 %", "[N/A]").replace("167.52 W", "[Not Supported]"),  # 8: fine, two NULLs
            ]
        )
        + "\n"
    )
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0
    assert dict(sql("SELECT line, reason FROM rejects ORDER BY line")) == {
        3: "expected 10 fields, found 5",
        4: "memory.used: 'lots MiB' is not a number",
        5: "timestamp: 'yesterday' is not a timestamp",
        6: "memory.used: unknown memory unit 'furlongs'",
        7: "index: 'x' is not an integer",
    }
    assert f"{path}:3: expected 10 fields, found 5" in result.stderr
    assert sql("SELECT line, instance, utilization_gpu, power_w, memory_free_bytes FROM gpu_samples ORDER BY line") == [
        (2, "node-7", 27.0, 167.52, 282 * MIB),
        (8, "node-7", None, None, 282 * MIB),
    ]
    assert sql("SELECT rows, rejects, kind FROM sources") == [(2, 5, "nvsmi_gpu")]


def test_nounits_and_a_process_name_with_commas(tmp_path, db, run_cli, sql) -> None:
    gpu = tmp_path / "node-8.gpu.csv"
    gpu.write_text(
        "timestamp, index, memory.used [MiB], memory.total [MiB]\n2026/11/30 01:50:03.541, 1, 4096, 143771\n"
    )
    apps = tmp_path / "node-8.apps.csv"
    apps.write_text(
        "timestamp, pid, process_name, used_gpu_memory [MiB]\n"
        "2026/11/30 01:50:03.035, 77, python3 -m serve --a=1,b=2, 4096 MiB\n"
    )
    assert run_cli("ingest", gpu, apps, "--db", db).exit_code == 0
    assert sql("SELECT instance, gpu_index, memory_used_bytes, memory_total_bytes FROM gpu_samples") == [
        ("node-8", 1, 4096 * MIB, 143771 * MIB)
    ]
    assert sql("SELECT pid, process_name, used_bytes FROM gpu_process_samples") == [
        (77, "python3 -m serve --a=1,b=2", 4096 * MIB)
    ]


CORPUS = H200.parent.parent / "cases" / "realworld" / "telemetry"


def test_a_csv_without_timestamps_loads_samples_without_a_time(db, run_cli, sql) -> None:
    # `name, fan.speed [%], memory.total [MiB], memory.used [MiB], ...`: two cards, no timestamp field
    path = CORPUS / "018_nvsmi_csv_two-gpus-units-no-timestamp" / "artifact.csv"
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    assert sql("SELECT line, ts, gpu_name, memory_used_bytes, memory_total_bytes FROM gpu_samples ORDER BY line") == [
        (2, None, "GeForce GTX 1080 Ti", 2856 * MIB, 11175 * MIB),
        (3, None, "GeForce GTX 1060 6GB", 4 * MIB, 6078 * MIB),
    ]
    # never placed in time by the file's modification time: the analyses' view leaves them out
    assert sql("SELECT count(*) FROM stg_gpu_samples") == [(0,)]


def test_at_places_samples_without_a_time(db, run_cli, sql) -> None:
    path = CORPUS / "018_nvsmi_csv_two-gpus-units-no-timestamp" / "artifact.csv"
    assert run_cli("ingest", path, "--at", "2020-07-25T14:00", "--tz", "Europe/Berlin", "--db", db).exit_code == 0
    assert sql("SELECT DISTINCT ts FROM stg_gpu_samples") == [(datetime(2020, 7, 25, 12, 0),)]


def test_a_headerless_csv_whose_fields_cannot_be_told_asks_for_the_header(db, run_cli, sql) -> None:
    """Refused, and kept: its source row counts the reject, and the rejects table says why (issue 38)."""
    path = CORPUS / "019_nvsmi_csv_noheader-nounits-not-supported" / "artifact.csv"
    assert detect_kind(path) == "nvsmi_gpu"  # `[Not Supported]` says nvidia-smi
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0
    reason = (
        "nvidia-smi CSV without a header: which value is which field cannot be told from the "
        "values ('2004, 2004, 0, 44, [Not Supported], 0, 0') (pass the queried field names with --columns (e.g. "
        "`--columns memory.total,memory.used`), or query it without `noheader`)"
    )
    assert f"{path}:1: {reason}" in " ".join(result.output.split())
    assert sql("SELECT count(*) FROM gpu_samples") == [(0,)]
    assert sql("SELECT kind, rows, rejects FROM sources") == [("nvsmi_gpu", 0, 1)]
    assert sql("SELECT line, reason FROM rejects") == [(1, reason)]


def test_a_headerless_compute_apps_csv_is_told_by_its_values(tmp_path, db, run_cli, sql) -> None:
    # run 2's compute-apps rows as `--format=csv,noheader` writes them: an integer, a name, one MiB amount
    rows = gzip.decompress((ENV / "nvsmi_apps_run2.csv.gz").read_bytes()).decode().splitlines()[1:4]
    path = tmp_path / "apps.csv"
    path.write_text("\n".join(r.split(", ", 1)[1] for r in rows) + "\n")
    assert detect_kind(path) == "nvsmi_apps"
    assert run_cli("ingest", path, "--db", db).exit_code == 0
    expected = [(n, int(r.split(", ")[1]), r.split(", ")[2], _mib(r.split(", ")[3])) for n, r in enumerate(rows, 1)]
    assert sql("SELECT line, pid, process_name, used_bytes FROM gpu_process_samples ORDER BY line") == expected
