"""memory_summary() tables and memory_stats() JSON from the real H200 captures: the same counters, exact from
the JSON and to the printed unit from the summary."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from oomlab.parse.allocator import AllocatorMoment, moment_rows, read_stats_json, read_summaries

from conftest import H200

SERVE_LEAK_END = {  # serve_leak/memory_stats_end.json, PyTorch's own counters
    "allocated_bytes": 4_930_370_560,
    "allocated_peak_bytes": 5_059_421_184,
    "reserved_bytes": 5_354_029_056,
    "requested_bytes": 4_886_071_424,
    "inactive_split_bytes": 283_149_312,
    "non_releasable_bytes": 283_149_312,
    "allocations": 782,
}


def _text(path: Path) -> str:
    """A capture as bundled here: gzip-compressed."""
    return gzip.decompress(path.read_bytes()).decode()


def _rows(moment: AllocatorMoment) -> dict[str, dict]:
    return {row["pool"]: row for row in moment_rows(moment)}


def test_memory_stats_json_is_exact() -> None:
    stats = read_stats_json(_text(H200 / "serve_leak" / "memory_stats_end.json.gz"))
    assert stats is not None
    rows = _rows(AllocatorMoment(1, "memory_stats", stats=stats))
    assert set(rows) == {"all", "large", "small"}
    assert {k: rows["all"][k] for k in SERVE_LEAK_END} == SERVE_LEAK_END
    assert (rows["all"]["num_ooms"], rows["all"]["num_alloc_retries"]) == (3, 4)
    assert rows["small"]["allocated_bytes"] == 35_840 and rows["small"]["num_ooms"] is None
    assert rows["all"]["exact_to_bytes"] == 1


def test_memory_summary_matches_the_json_to_the_printed_unit() -> None:
    (moment,) = read_summaries(_text(H200 / "serve_leak" / "memory_summary_end.txt.gz"))
    assert moment.gpu_index == 0 and moment.line == 2 and moment.origin == "memory_summary"
    rows = _rows(moment)
    for column, exact in SERVE_LEAK_END.items():
        unit = moment.unit_bytes.get(_key(column), 1)
        # _format_size floors: the printed value is at most one unit below the exact one
        assert 0 <= exact - rows["all"][column] < unit, column
    assert rows["all"]["allocated_bytes"] == 4701 << 20  # `4701 MiB`
    assert rows["all"]["non_releasable_bytes"] == 276_513 << 10  # `276513 KiB`
    assert (rows["all"]["num_ooms"], rows["all"]["num_alloc_retries"]) == (3, 4)  # the header's counters
    assert rows["small"]["allocations"] == 19


def _key(column: str) -> str:
    metric = {"allocations": "allocation", "non_releasable_bytes": "inactive_split_bytes"}.get(column)
    if column.endswith("_peak_bytes"):
        return f"{column.removesuffix('_peak_bytes')}_bytes.all.peak"
    return f"{metric or column}.all.current"


@pytest.mark.parametrize("run", ["cache_bloat", "serve_leak", "serve_mixed", "fragmentation", "model_swap"])
def test_every_summary_agrees_with_its_json(run: str) -> None:
    summaries = sorted((H200 / run).glob("memory_summary_*.txt.gz"))
    assert summaries
    for summary in summaries:
        stats_file = summary.with_name(summary.name.replace("memory_summary", "memory_stats").replace(".txt", ".json"))
        exact = _rows(AllocatorMoment(1, "memory_stats", stats=json.loads(_text(stats_file))))
        (moment,) = read_summaries(_text(summary))
        for pool, row in _rows(moment).items():
            for column in ("allocated_bytes", "reserved_bytes", "active_bytes", "allocations", "segments"):
                assert 0 <= exact[pool][column] - row[column] < row["exact_to_bytes"], (summary.name, pool, column)


def test_several_summaries_in_one_log_are_several_moments() -> None:
    """Two real printouts (cache_bloat at request 0 and at its end) in one log, behind a logger's prefix."""
    first = _text(H200 / "cache_bloat" / "memory_summary_req0.txt.gz").splitlines()
    last = _text(H200 / "cache_bloat" / "memory_summary_end.txt.gz").splitlines()
    log = ["INFO starting", *(f"2026-11-30 01:00:00 INFO {line}" for line in first), "INFO served 400", *last]
    moments = read_summaries("\n".join(log))
    assert [m.line for m in moments] == [3, len(first) + 4]
    assert [_rows(m)["all"]["reserved_bytes"] for m in moments] == [2258 << 20, 4920 << 20]


def test_not_memory_stats() -> None:
    assert read_stats_json('{"allocated_bytes": 5}') is None
    assert read_stats_json("not json") is None
    assert read_summaries("| Allocated memory | 5 MiB |") == []  # a row without its table's header
