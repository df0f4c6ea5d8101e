"""Older snapshot shapes. Every legacy input here is DERIVED FROM A REAL CAPTURE (fragmentation's
snapshot_fragmented_oom, loaded with the safe unpickler) by undoing what newer PyTorch versions added;
none is hand-written. Each must read into the same tables as the original where the shape keeps the data."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from oomlab.parse.snapshot.read import SnapshotData, read_snapshot

from snapshot_cases import raw_case, read_case

SCENARIO, NAME = "fragmentation", "snapshot_fragmented_oom"


def _write(tmp_path: Path, obj: Any, protocol: int = 4) -> Path:
    path = tmp_path / f"derived-{protocol}.pickle.gz"
    path.write_bytes(gzip.compress(pickle.dumps(obj, protocol=protocol)))
    return path


def _original() -> SnapshotData:
    return read_case(SCENARIO, NAME)


def _blocks(raw: dict[str, Any]) -> list[dict[str, Any]]:
    return [block for segment in raw["segments"] for block in segment["blocks"]]


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_every_pickle_protocol_reads_the_same(tmp_path: Path, protocol: int) -> None:
    data = read_snapshot(_write(tmp_path, raw_case(SCENARIO, NAME), protocol))
    for table in ("segments", "blocks", "trace_events", "stacks", "frames", "ooms"):
        assert getattr(data, table).equals(getattr(_original(), table)), table


def test_bare_list_of_segments(tmp_path: Path) -> None:
    """PyTorch 1.13: `_snapshot()` returned the segment list alone."""
    data = read_snapshot(_write(tmp_path, raw_case(SCENARIO, NAME)["segments"], protocol=2))
    assert data.meta.legacy_shapes == ("bare_segment_list",)
    assert data.trace_events.num_rows == 0 and data.ooms.num_rows == 0
    assert data.meta.first_time_us is None
    # Stack ids are numbered in the order stacks are met, the trace's first: without a trace the blocks'
    # stacks get other ids, so they are compared by what they hold.
    assert _with_stack_content(data, "blocks") == _with_stack_content(_original(), "blocks")
    assert _with_stack_content(data, "segments") == _with_stack_content(_original(), "segments")
    assert data.stacks.num_rows == 2 < _original().stacks.num_rows  # the empty stack, and step:250


def _with_stack_content(data: SnapshotData, table: str) -> list[dict[str, Any]]:
    """The rows of `table`, each stack id replaced by the (filename, name, line) of its frames."""
    content: dict[int, list[tuple[str, str, int]]] = {}
    for frame in data.frames.to_pylist():  # rows come in depth order within each stack
        content.setdefault(frame["stack_id"], []).append((frame["filename"], frame["name"], frame["line"]))
    rows = getattr(data, table).to_pylist()
    return [dict(row, stack_id=tuple(content.get(row["stack_id"], ()))) for row in rows]


def test_blocks_with_history_instead_of_frames(tmp_path: Path) -> None:
    """Before 2.1 a block carried `history` [{addr, real_size, frames}] instead of frames + requested_size."""
    raw = raw_case(SCENARIO, NAME)
    for block in _blocks(raw):
        frames, requested = block.pop("frames"), block.pop("requested_size")
        block["history"] = [{"addr": block["address"], "real_size": requested, "frames": frames}]
    data = read_snapshot(_write(tmp_path, raw))
    assert data.blocks.equals(_original().blocks)
    assert data.stacks.equals(_original().stacks)


def test_blocks_without_history_or_address(tmp_path: Path) -> None:
    """1.13 blocks had no address (they tile the segment in order) and a free block no history."""
    raw = raw_case(SCENARIO, NAME)
    for block in _blocks(raw):
        del block["address"]
        frames, requested = block.pop("frames"), block.pop("requested_size")
        if block["state"] != "inactive":
            block["history"] = [{"addr": 0, "real_size": requested, "frames": frames}]
    data = read_snapshot(_write(tmp_path, raw))
    assert data.blocks["address"].equals(_original().blocks["address"])
    assert data.meta.allocated_bytes == _original().meta.allocated_bytes


@pytest.mark.parametrize("spelling", ["active_awaiting_free", "active_pending_free"])
def test_both_pending_free_spellings(tmp_path: Path, spelling: str) -> None:
    """A block freed on one stream but used on another: the older spelling is renamed to the current one."""
    raw = raw_case(SCENARIO, NAME)
    pending = [b for b in _blocks(raw) if b["state"] == "active_allocated"][:10]
    for block in pending:
        block["state"] = spelling
    data = read_snapshot(_write(tmp_path, raw))
    states = data.blocks["state"]
    assert pc.sum(pc.equal(states, "active_pending_free")).as_py() == 10
    assert "active_awaiting_free" not in states.to_pylist()
    assert data.meta.allocated_bytes == _original().meta.allocated_bytes - sum(b["size"] for b in pending)
    assert data.meta.active_bytes == _original().meta.active_bytes


def test_without_device_traces_settings_or_annotations(tmp_path: Path) -> None:
    """Before 2.1 there was no trace ring, and no allocator_settings / external_annotations."""
    raw = raw_case(SCENARIO, NAME)
    for key in ("device_traces", "allocator_settings", "external_annotations"):
        del raw[key]
    data = read_snapshot(_write(tmp_path, raw))
    assert data.trace_events.num_rows == 0
    assert data.meta.allocator_settings is None and data.meta.external_annotations == ()
    assert data.meta.reserved_bytes == _original().meta.reserved_bytes


def test_segments_without_newer_keys(tmp_path: Path) -> None:
    """Older segments lack requested_size, segment_pool_id, is_expandable and frames."""
    raw = raw_case(SCENARIO, NAME)
    for segment in raw["segments"]:
        for key in ("requested_size", "segment_pool_id", "is_expandable", "frames"):
            del segment[key]
    data = read_snapshot(_write(tmp_path, raw))
    assert data.segments["requested_size"].equals(_original().segments["requested_size"])
    assert set(data.segments["pool"].to_pylist()) == {"large"}


def test_trace_entries_without_time(tmp_path: Path) -> None:
    """Early trace entries had no time_us."""
    raw = raw_case(SCENARIO, NAME)
    for entry in raw["device_traces"][0]:
        del entry["time_us"]
    data = read_snapshot(_write(tmp_path, raw))
    assert data.trace_events["time_us"].null_count == data.trace_events.num_rows
    assert data.meta.first_time_us is None
