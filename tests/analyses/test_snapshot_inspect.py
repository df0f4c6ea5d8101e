"""The no-DB `inspect` / `diff` dicts (a stable JSON contract) and the load into DuckDB with labels."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from oomlab.analyses.snapshot.inspect import diff_snapshots, inspect_database, inspect_snapshot
from oomlab.analyses.snapshot.leaks import SUSPECT_COLUMNS
from oomlab.load.snapshot import SnapshotLabels, insert_snapshot
from oomlab.load.sql import apply_schema

from snapshot_cases import GIB, read_case, snapshot_path

DOCUMENTED_KEYS = {
    "path",
    "format",
    "legacy_shapes",
    "allocated_bytes",
    "active_bytes",
    "reserved_bytes",
    "reserved_unallocated_bytes",
    "requested_bytes",
    "largest_free_block_bytes",
    "free_bytes",
    "fragmentation",
    "internal_waste_bytes",
    "expandable_segments",
    "first_time_us",
    "last_time_us",
    "segments",
    "blocks",
    "trace_events",
    "allocator_settings",
    "pools",
    "devices",
    "top_sites",
    "leak_suspects",
    "leak_basis",
    "series",
    "oom_events",
    "timeline",
}
OOM_KEYS = {
    "time_us",
    "requested_bytes",
    "device_free_bytes",
    "reserved_unallocated_bytes",
    "largest_free_block_bytes",
    "cause",
    "explanation",
    "allocated_bytes",
    "reserved_bytes",
    "seq",
    "device",
}


def test_inspect_returns_the_documented_json() -> None:
    result = inspect_snapshot(snapshot_path("fragmentation_expandable", "snapshot_fragmented_oom"), requested_bytes=GIB)
    assert set(result) == DOCUMENTED_KEYS | {"fit"}
    assert json.loads(json.dumps(result)) == result
    assert result["expandable_segments"] is True
    assert result["reserved_unallocated_bytes"] == 3670016000 - 1826619392
    assert result["segments"] == 1 and result["trace_events"] == 1336
    assert result["allocator_settings"]["expandable_segments"] is True
    (oom,) = result["oom_events"]
    assert set(oom) == OOM_KEYS and oom["cause"] == "fragmentation"
    assert result["fit"]["fits"] is False and result["fit"]["cause"] == "fragmentation"
    assert set(result["top_sites"][0]) == {"site", "bytes", "blocks", "requested_bytes", "share_of_allocated"}


def test_inspect_serve_leak_names_the_suspect() -> None:
    result = inspect_snapshot(snapshot_path("serve_leak"), top=3)
    assert len(result["top_sites"]) == 3
    assert result["leak_suspects"][0]["site"].startswith("transformers/cache_utils.py:update:14")
    assert set(result["leak_suspects"][0]) == set(SUSPECT_COLUMNS)
    assert [o["cause"] for o in result["oom_events"]] == ["per_process_cap", "per_process_cap"]
    assert result["timeline"]["event_count"] == 60000
    assert "fit" not in result


def test_diff_serve_leak_first_oom_to_end() -> None:
    diff = diff_snapshots(snapshot_path("serve_leak", "snapshot_first_oom"), snapshot_path("serve_leak"))
    assert diff["delta_allocated_bytes"] == 4930370560 - 4733015040
    top = {row["site"]: row for row in diff["sites"][:2]}
    assert set(top) == {"transformers/cache_utils.py:update:146", "transformers/cache_utils.py:update:147"}
    assert all(row["delta_blocks"] == 40 and row["delta_bytes"] > 0 for row in top.values())
    assert len(diff["segments_added"]) == len(diff["segments_removed"]) == 1
    assert json.loads(json.dumps(diff)) == diff


def test_insert_two_snapshots_with_labels_into_one_database() -> None:
    con = duckdb.connect(":memory:")
    apply_schema(con)
    labels = SnapshotLabels(instance="gpu-node-3", model_version="llama-v2", tags={"run": "nightly"})
    insert_snapshot(con, read_case("serve_leak"), 7, source_id=70, labels=labels)
    insert_snapshot(con, read_case("cache_bloat"), 8, source_id=80)
    row = con.execute(
        "SELECT source_id, instance, model_version, tags->>'run', device, expandable_segments, "
        "oom_count FROM snapshots WHERE snapshot_id = 7"
    ).fetchall()
    assert row == [(70, "gpu-node-3", "llama-v2", "nightly", 0, False, 2)]
    counts = con.execute("SELECT snapshot_id, count(*) FROM trace_events GROUP BY ALL ORDER BY 1").fetchall()
    assert counts == [(7, 60000), (8, 4231)]
    assert inspect_database(con, 8)["allocated_bytes"] == 2 * GIB
    assert inspect_database(con, 7)["allocated_bytes"] == 4930370560
    for table in ("segments", "blocks", "stacks", "frames", "snapshot_ooms"):
        ids = {r[0] for r in con.execute(f"SELECT DISTINCT snapshot_id FROM {table}").fetchall()}
        assert ids <= {7, 8} and 7 in ids, table


def test_inspect_a_snapshot_without_trace(tmp_path: Path) -> None:
    """Derived from the real serve_leak capture: the bare segment list (PyTorch 1.13 shape), re-pickled."""
    import pickle

    from snapshot_cases import raw_case

    path = tmp_path / "bare.pickle"
    path.write_bytes(pickle.dumps(raw_case("serve_leak")["segments"], protocol=2))
    result = inspect_snapshot(path)
    assert result["legacy_shapes"] == ["bare_segment_list"]
    assert (result["trace_events"], result["timeline"], result["oom_events"]) == (0, None, [])
    # no trace, so no growth to see: the KV cache is still named, by its pile of blocks, and less surely
    assert result["leak_basis"] == {"trace": "none", "snapshots": 1, "no_stack_bytes": 0}
    top = result["leak_suspects"][0]
    assert top["site"].startswith("transformers/cache_utils.py:update:14") and top["confidence"] == 0.75
    assert (top["growth_bytes"], top["window_steps"]) == (0, 0)
    assert result["allocated_bytes"] == 4930370560
    assert result["top_sites"][0]["site"].startswith("transformers/cache_utils.py:update:14")


# Real snapshot snapshots/001 of the corpus (a training run on cuda:0-2); per device: segments, their total_size,
# the active_allocated blocks' sizes, the largest inactive block and all inactive blocks, read from the pickle with
# a restricted unpickler of our own
THREE_GPUS = {
    0: (2, 8_541_700_096, 8_094_645_248, 170_372_608, 447_054_848),
    1: (8, 84_202_749_952, 403_507_712, 27_493_662_720, 83_799_242_240),
    2: (2, 21_883_781_120, 20_230_674_944, 573_698_048, 1_653_106_176),
}


def test_a_multi_gpu_snapshot_states_each_device_and_no_cross_device_block() -> None:
    """Each GPU's totals are its own; the snapshot's fragmentation counts each device's largest free block, as no
    request can use a block on another GPU."""
    path = Path(__file__).resolve().parents[1] / "cases" / "realworld" / "snapshots"
    result = inspect_snapshot(path / "001_code-location-expandable-3gpu-oom" / "artifact.pickle.gz")
    columns = ("segment_count", "reserved_bytes", "allocated_bytes", "largest_free_block_bytes", "free_bytes")
    got = {d["device"]: tuple(d[c] for c in columns) for d in result["devices"]}
    assert got == THREE_GPUS
    free = sum(v[4] for v in THREE_GPUS.values())
    assert result["fragmentation"] == pytest.approx(1 - sum(v[3] for v in THREE_GPUS.values()) / free)
    assert result["largest_free_block_bytes"] == THREE_GPUS[1][3]
