"""Prometheus series as stores answer them (parse/telemetry/series.py): real API answers, VictoriaMetrics exports
and timestamped exposition text of tests/cases/realworld/prom_api/, each copied from the URL its case.json names,
read into the series, sample counts, first and last samples the case states. Whole files are read by their
format's reader; text is read where oomlab reads it, in the blocks the text-log scan finds."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from pathlib import Path

from corpus import cases

from oomlab.parse import formats

PROM_API_CASES = [c for c in cases() if c.name.startswith("prom_api/")]
_JSON_KINDS = (formats.BY_NAME["prometheus_api"], formats.BY_NAME["victoriametrics_export"])


def test_there_are_real_cases_of_each_kind() -> None:
    kinds = defaultdict(int)
    for case in PROM_API_CASES:
        kinds[case.spec["kind"]] += 1
    assert all(kinds[k] >= 3 for k in ("prom_query_range", "prom_query", "vm_export", "openmetrics_ts")), kinds


def test_dcgm_answer_pasted_in_text_lands_in_gpu_samples(tmp_path: Path) -> None:
    """The H100 answer of case 009 (a Markdown fence in NVIDIA's conformance evidence): 16 GPUs over two nodes, the
    busy one 74166 MiB, each on its node, each at the answer's time."""
    from corpus import ingest_case

    (case,) = [c for c in PROM_API_CASES if c.name.startswith("prom_api/009_")]
    con = ingest_case(case, tmp_path / "t.duckdb")
    rows = con.execute(
        "SELECT instance, gpu_index, memory_used_bytes, ts, pod FROM gpu_samples ORDER BY instance, gpu_index"
    ).fetchall()
    assert len(rows) == 16
    assert {r[0] for r in rows} == {"gpu-node-1", "gpu-node-2"}
    busy = [r for r in rows if r[2]]
    assert busy == [("gpu-node-1", 0, 74166 * 2**20, datetime(2026, 3, 10, 3, 41, 29, 444000), busy[0][4])]
    assert busy[0][4] == "vllm-agg-0-vllmdecodeworker-s65j5"
