"""One search serves every reader of a text log: the OOM scan and vLLM's start-up reports, numbered alike."""

from __future__ import annotations

import gzip
import random
from datetime import datetime
from pathlib import Path

import pytest
from test_telemetry_vllm import OOM, V0, V1

from oomlab.parse.oom.message import OOM_MARKERS
from oomlab.parse.telemetry.startup import FINDER, MARKERS, StartupScanner
from oomlab.parse.text import needles, textscan, textsearch
from oomlab.parse.text.logline import LineClock
from oomlab.parse.text.ripgrep import RIPGREP_ENV
from oomlab.parse.text.textlog import scan_text_log


def _log(seed: int = 7) -> tuple[str, list[int], list[int]]:
    """Filler with v0 and v1 start-up reports and OOM messages, some lines holding both kinds of marker;
    returns the text, the OOM lines and the report lines."""
    rng = random.Random(seed)
    lines: list[str] = []
    ooms, reports = [], []
    for i in range(60):
        lines += [
            f"INFO 08-12 22:33:{j % 60:02d} [engine.py:1] step {j} GPU KV cache usage: 1.{j}%"
            for j in range(rng.randrange(30, 400))
        ]
        pick = i % 3
        if pick == 0:
            reports.append(len(lines) + 1)
            lines += V0.splitlines() if i % 2 else V1.splitlines()
        elif pick == 1:
            ooms.append(len(lines) + 1)
            lines.append(OOM.rstrip("\n"))
        else:  # a line with an OOM marker and a start-up marker: both readers take it
            ooms.append(len(lines) + 1)
            reports.append(len(lines) + 1)
            lines.append(
                "2026-11-30T01:50:04.000Z ERROR CUDA out of memory. Tried to allocate 2.00 GiB. "
                "Available KV cache memory: 12.00 GiB"
            )
    return "\n".join(lines) + "\n", ooms, reports


@pytest.mark.parametrize("engine", ["ripgrep", "ripgrep-needles", "in-process"])
@pytest.mark.parametrize("kind", ["plain", "gzip"])
@pytest.mark.parametrize("chunk", [textscan.SEGMENT_BYTES, 5000])
def test_shared_search_numbers_both_readers_as_their_own_searches_do(
    tmp_path: Path, kind: str, chunk: int, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, oom_lines, report_lines = _log()
    path = tmp_path / ("mixed.log.gz" if kind == "gzip" else "mixed.log")
    path.write_bytes(gzip.compress(text.encode()) if kind == "gzip" else text.encode())
    if engine == "in-process":
        monkeypatch.setenv(RIPGREP_ENV, "off")
    if engine == "ripgrep-needles":  # needles chosen from the log, as for a large one
        monkeypatch.setattr(needles, "CHOOSE_FROM_BYTES", 0)
    monkeypatch.setattr(textscan, "SMALL_BYTES", 0)  # the polars search, whatever the window's size
    monkeypatch.setattr(textsearch, "BLOCK_BYTES", 2000)  # several messages in some blocks

    runs = []
    for also in ([FINDER], []):  # searched ahead with the OOM markers, or by the reader itself
        scanner = StartupScanner(LineClock(year=2026))
        ooms = list(scan_text_log(path, chunk_size=chunk, on_window=scanner.window, also=also))
        runs.append((ooms, scanner.reports()))
    assert runs[0] == runs[1]
    ooms, reports = runs[0]
    assert [o.line for o in ooms] == oom_lines
    assert {r.line for r in reports} == set(report_lines)
    assert reports[0].line == report_lines[0] and reports[0].ts == datetime(2026, 10, 6, 17, 0, 11)
    assert reports[0].kv_cache_bytes == round(56.21 * (1 << 30))


@pytest.mark.parametrize("engine", ["ripgrep", "ripgrep-needles", "in-process"])
def test_marked_lines_carry_their_numbers(tmp_path: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if engine == "in-process":
        monkeypatch.setenv(RIPGREP_ENV, "off")
    if engine == "ripgrep-needles":  # needles chosen from the log, as for a large one
        monkeypatch.setattr(needles, "CHOOSE_FROM_BYTES", 0)
    text, oom_lines, report_lines = _log(seed=3)
    path = tmp_path / "mixed.log"
    path.write_bytes(text.encode())
    oom_finder, startup = textscan.MarkerFinder(OOM_MARKERS), textscan.MarkerFinder(MARKERS)
    windows = list(textscan.iter_windows(path, [oom_finder, startup], segment=4096))
    starts = [0] + [i + 1 for i, c in enumerate(text.encode()) if c == 10]  # offset of each line, by number - 1
    for finder in (oom_finder, startup):
        marks = [(w.base + s, n) for w in windows for s, n in w.marked(finder)]
        assert all(starts[n - 1] == offset for offset, n in marks)
    oom_marked = sorted({n for w in windows for _, n in w.marked(oom_finder)})
    assert set(oom_lines) <= set(oom_marked)  # plus the reports' `KV cache memory` lines, which hold an OOM marker
    assert {n for w in windows for _, n in w.marked(startup)} >= set(report_lines)
