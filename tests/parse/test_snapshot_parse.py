"""Reading the real H200 captures into tables: totals agree with PyTorch's own accounting."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from oomlab.parse.compression import read_head
from oomlab.parse.snapshot.read import read_snapshot, sniff_snapshot

from snapshot_cases import DATA, SNAPSHOTS, read_case, snapshot_path

# Snapshot -> the memory_stats dump taken at the same moment (fixtures README: both dumped together).
STATS_AT_SAME_MOMENT = {
    ("serve_leak", "snapshot_end"): "memory_stats_end",
    ("serve_leak", "snapshot_first_oom"): "memory_stats_first_oom",
    ("serve_mixed", "snapshot_end"): "memory_stats_end",
    ("serve_mixed", "snapshot_first_oom"): "memory_stats_first_oom",
    ("cache_bloat", "snapshot_end"): "memory_stats_end",
    ("fragmentation", "snapshot_after_empty_cache"): "memory_stats_after_empty_cache",
    ("fragmentation_expandable", "snapshot_after_empty_cache"): "memory_stats_after_empty_cache",
    ("model_swap", "snapshot_end"): "memory_stats_clean_True",
}


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_capture_parses_and_active_blocks_sum_to_allocated(path: Path) -> None:
    data = read_case(path.parent.name, path.name.removesuffix(".pickle.gz"))
    blocks, segments = data.blocks, data.segments
    allocated = pc.sum(pc.filter(blocks["size"], pc.equal(blocks["state"], "active_allocated"))).as_py()
    assert allocated == data.meta.allocated_bytes == pc.sum(segments["allocated_size"]).as_py()
    assert data.meta.reserved_bytes == pc.sum(segments["total_size"]).as_py()
    assert data.meta.trace_event_count == data.trace_events.num_rows > 0
    assert data.meta.format == "pickle" and data.meta.legacy_shapes == ()
    # Blocks tile their segment.
    per_segment = blocks.group_by("segment_id").aggregate([("size", "sum")]).sort_by("segment_id")
    assert per_segment["size_sum"].to_pylist() == segments.sort_by("segment_id")["total_size"].to_pylist()


@pytest.mark.parametrize(("scenario", "name"), sorted(STATS_AT_SAME_MOMENT))
def test_totals_equal_torch_memory_stats(scenario: str, name: str) -> None:
    stats_file = DATA / scenario / f"{STATS_AT_SAME_MOMENT[scenario, name]}.json.gz"
    stats = json.loads(gzip.decompress(stats_file.read_bytes()))
    meta = read_case(scenario, name).meta
    assert meta.allocated_bytes == stats["allocated_bytes.all.current"]
    assert meta.reserved_bytes == stats["reserved_bytes.all.current"]
    assert meta.active_bytes == stats["active_bytes.all.current"]


def test_trace_columns_and_oom_rows() -> None:
    data = read_case("serve_leak", "snapshot_end")
    events = data.trace_events
    assert events.column_names == ["device", "seq", "action", "addr", "size", "stream", "time_us", "stack_id"]
    assert events["seq"].to_pylist() == list(range(60000))
    assert data.meta.first_time_us == 1796003377516475 and data.meta.last_time_us == 1796003377870165
    ooms = data.ooms.to_pylist()
    assert [(o["requested_bytes"], o["device_free_bytes"]) for o in ooms] == [
        (23068672, 144002121728),
        (16777216, 144002121728),
    ]
    # An oom entry has no address.
    assert events["addr"].take([ooms[0]["seq"]]).to_pylist() == [None]


def test_stacks_are_interned_once() -> None:
    data = read_case("serve_leak", "snapshot_end")
    stacks, frames = data.stacks, data.frames
    assert data.meta.stack_count == stacks.num_rows < 300
    assert stacks["stack_id"].to_pylist() == list(range(stacks.num_rows))
    keys: dict[int, list[tuple[str, str, int]]] = {}
    for row in frames.to_pylist():
        keys.setdefault(row["stack_id"], []).append((row["filename"], row["name"], row["line"]))
    assert len(set(map(tuple, keys.values()))) == len(keys)
    assert pc.max(data.trace_events["stack_id"]).as_py() < stacks.num_rows


def test_sites_skip_framework_plumbing() -> None:
    sites = set(read_case("serve_leak", "snapshot_end").stacks["site"].to_pylist())
    assert {
        "transformers/cache_utils.py:update:146",
        "transformers/cache_utils.py:update:147",
        "transformers/modeling_utils.py:to:3706",
    } <= sites
    assert not any(site.startswith(("torch/nn/modules/module.py", "torch/utils/_contextlib.py")) for site in sites)


def test_cpp_frames_are_kept_and_sites_are_python() -> None:
    data = read_case("big_trace_cpp")
    filenames = set(data.frames["filename"].to_pylist())
    assert "CUDACachingAllocator.cpp" in filenames and "??" in filenames
    assert any(name.startswith("c10::cuda::CUDACachingAllocator") for name in data.frames["name"].to_pylist())
    sites = [s for s in data.stacks["site"].to_pylist() if s != "<no stack>"]
    assert sites and all(".py:" in site for site in sites)


def test_expandable_segments_are_reported() -> None:
    assert read_case("fragmentation_expandable", "snapshot_fragmented_oom").meta.expandable_segments
    assert not read_case("fragmentation", "snapshot_fragmented_oom").meta.expandable_segments
    data = read_case("fragmentation_expandable", "snapshot_fragmented_oom")
    assert data.segments["is_expandable"].to_pylist() == [True]
    assert data.meta.alloc_conf == "expandable_segments:True"


def test_json_form_reads_like_the_pickle(tmp_path: Path) -> None:
    """The JSON form is derived from a real capture: tuples become lists and nothing is shared."""
    from snapshot_cases import raw_case

    raw = raw_case("fragmentation", "snapshot_fragmented_oom")
    path = tmp_path / "snapshot.json.gz"
    path.write_bytes(gzip.compress(json.dumps(raw).encode()))
    from_json, from_pickle = read_snapshot(path), read_case("fragmentation", "snapshot_fragmented_oom")
    assert from_json.meta.format == "json"
    for table in ("segments", "blocks", "trace_events", "stacks", "frames", "ooms"):
        assert getattr(from_json, table).cast(getattr(from_pickle, table).schema).equals(getattr(from_pickle, table)), (
            table
        )


def test_sniff_snapshot() -> None:
    assert sniff_snapshot(read_head(snapshot_path("cache_bloat"))) == "pickle"
    assert sniff_snapshot(b' \n{"segments": [], "device_traces": []}') == "json"
    assert sniff_snapshot(b'{"ts": 1, "request_id": "a"}') is None
    assert sniff_snapshot(b"2026-01-01 CUDA out of memory") is None
