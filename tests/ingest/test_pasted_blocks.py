"""Telemetry found wherever it stands (issue 38): real reports of the corpus (tests/cases/realworld/telemetry/, each
copied from the URL its case.json names), pasted into prose the ways on-call engineers paste them: in a Markdown
fence under the command that printed them, indented in a report, quoted in a reply, commented out. Each wrapped
text must yield the rows the bare report yields, at the line numbers they have in the wrapped file.

The wrapped texts are derived from the real artifacts here, not collected: the real pasted shapes are in
tests/cases/realworld/pasted_tables/ and pasted_text/.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from oomlab import api
from oomlab.config import IngestOptions

TELEMETRY = Path(__file__).resolve().parent.parent / "cases" / "realworld" / "telemetry"
# case folder -> the command that prints it
REPORTS = {
    "018_nvsmi_csv_two-gpus-units-no-timestamp": "nvidia-smi --query-gpu=name,fan.speed,memory.total --format=csv",
    "051_other_nvsmi-dmon-8gpu-3-samples": "nvidia-smi dmon -d 5",
    "002_nvsmi_table_h200-590-load": "nvidia-smi",
    "034_dcgm_prom_a100-mps-two-pods": "curl -s localhost:9400/metrics",
    "049_rocm_smi_showmeminfo-vram-bytes": "rocm-smi --showmeminfo vram",
    "027_nvsmi_query_h100-590-load": "nvidia-smi -q",
}
PROSE = ["We keep hitting CUDA OOM on this node since the upgrade.", "Here is what the GPU looked like:", ""]


def _fenced(lines: list[str], command: str) -> list[str]:
    return ["```console", f"user@gpu-node-7:~$ {command}", *lines, "```"]


def _indented(lines: list[str], command: str) -> list[str]:
    return [f"    $ {command}", *(f"    {line}" if line.strip() else "" for line in lines)]


def _quoted(lines: list[str], command: str) -> list[str]:
    return [f"> # {command}", *(f"> {line}" for line in lines)]


def _commented(lines: list[str], command: str) -> list[str]:
    return [f"# $ {command}", *(f"# {line}" for line in lines)]


WRAPPERS = {"fenced": _fenced, "indented": _indented, "quoted": _quoted, "commented": _commented}
COLUMNS = {
    "gpu_samples": "gpu_index, gpu_name, gpu_uuid, memory_used_bytes, memory_total_bytes, memory_free_bytes, power_w",
    "gpu_process_samples": "gpu_index, pid, process_name, used_bytes",
}


def _rows(path: Path, db: Path) -> dict[str, list[tuple]]:
    api.ingest(db, [str(path)], IngestOptions())
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            table: con.execute(f"SELECT line, {columns} FROM {table} ORDER BY line, gpu_index").fetchall()
            for table, columns in COLUMNS.items()
        }
    finally:
        con.close()


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("case", REPORTS)
def test_a_pasted_report_yields_the_rows_of_the_bare_one(tmp_path: Path, case: str, wrapper: str) -> None:
    (artifact,) = (TELEMETRY / case).glob("artifact.*")
    bare = _rows(artifact, tmp_path / "bare.duckdb")
    assert any(bare.values()), "the bare report yields rows"
    lines = artifact.read_text().splitlines()
    wrapped = WRAPPERS[wrapper](lines, REPORTS[case])
    pasted = tmp_path / "ticket.md"
    pasted.write_text("\n".join([*PROSE, *wrapped, "", "Any idea what holds the memory?"]) + "\n")
    # the report's first line is the line after the prose and the wrapper's own first line
    shift = len(PROSE) + 1 + (1 if wrapper == "fenced" else 0)
    got = _rows(pasted, tmp_path / "pasted.duckdb")
    for table, rows in bare.items():
        assert got[table] == [(line + shift, *rest) for line, *rest in rows], table


def test_a_headerless_csv_takes_its_names_from_the_command_above_it(tmp_path: Path) -> None:
    """018's rows without their header, under the command that queried them with `noheader`."""
    lines = (TELEMETRY / "018_nvsmi_csv_two-gpus-units-no-timestamp" / "artifact.csv").read_text().splitlines()
    header, rows = lines[0], lines[1:]
    names = ",".join(name.split("[")[0].strip() for name in header.split(","))
    command = f"nvidia-smi --query-gpu={names} --format=csv,noheader"
    pasted = tmp_path / "ticket.md"
    pasted.write_text("\n".join(["Output:", "```", f"$ {command}", *rows, "```"]) + "\n")
    got = _rows(pasted, tmp_path / "pasted.duckdb")["gpu_samples"]
    assert [(line, name, total, used) for line, _, name, _, used, total, *_ in got] == [
        (4, "GeForce GTX 1080 Ti", 11175 << 20, 2856 << 20),
        (5, "GeForce GTX 1060 6GB", 6078 << 20, 4 << 20),
    ]


def test_a_headerless_csv_with_no_command_is_refused_with_its_line_kept(tmp_path: Path) -> None:
    """The same rows with nothing naming their fields: no row, and a reject that says why, on the block's line."""
    lines = (TELEMETRY / "018_nvsmi_csv_two-gpus-units-no-timestamp" / "artifact.csv").read_text().splitlines()
    pasted = tmp_path / "ticket.md"
    pasted.write_text("\n".join(["Output:", "```", *lines[1:], "```"]) + "\n")
    db = tmp_path / "pasted.duckdb"
    api.ingest(db, [str(pasted)], IngestOptions())
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM gpu_samples").fetchone() == (0,)
        ((line, reason),) = con.execute("SELECT line, reason FROM rejects").fetchall()
        assert line == 3 and "without a header" in reason
        assert con.execute("SELECT rejects FROM sources").fetchone() == (1,)
    finally:
        con.close()


def test_a_csv_whose_header_the_poster_dropped_is_named_by_its_command_notes_and_all(tmp_path: Path) -> None:
    """018's rows under the `--format=csv` command that printed a header the poster left out, each row with a note
    after it (the shape of pasted_tables/003, a Korean blog post); and its memory.used column queried alone, one
    value per GPU and no comma. A `#` inside a row (no run of spaces before it) is a value, not a note."""
    lines = (TELEMETRY / "018_nvsmi_csv_two-gpus-units-no-timestamp" / "artifact.csv").read_text().splitlines()
    header, rows = lines[0], lines[1:]
    names = ",".join(name.split("[")[0].strip() for name in header.split(","))
    used = [row.split(", ")[3] for row in rows]
    text = [
        "Output:",
        "```",
        f"$ nvidia-smi --query-gpu={names} --format=csv",
        f"{rows[0]}    <- the one that OOMs",
        f"{rows[1].replace('GTX 1060', 'GTX #1060')}   ← idle",
        "",
        "$ nvidia-smi --query-gpu=memory.used --format=csv",
        f"{used[0]}        # after the restart",
        used[1],
        "```",
    ]
    pasted = tmp_path / "ticket.md"
    pasted.write_text("\n".join(text) + "\n")
    got = _rows(pasted, tmp_path / "pasted.duckdb")["gpu_samples"]
    assert [(line, name, total, used) for line, _, name, _, used, total, *_ in got] == [
        (4, "GeForce GTX 1080 Ti", 11175 << 20, 2856 << 20),
        (5, "GeForce GTX #1060 6GB", 6078 << 20, 4 << 20),
        (8, None, None, 2856 << 20),
        (9, None, None, 4 << 20),
    ]
