"""The final allocator state of a snapshot (segments and their blocks) as Arrow tables."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ...errors import InputError
from .legacy import block_addresses_from_offsets, block_frames_and_request, block_state, pool_id_pair
from .limits import kind_of, text_value
from .stacks import StackInterner

Segment = dict[str, Any]
Block = dict[str, Any]


def segment_tables(
    segments: list[Segment], interner: StackInterner, name: str = "<snapshot>"
) -> tuple[pa.Table, pa.Table]:
    """The `segments` and `blocks` tables of one snapshot. The text columns (state, segment type) must be text
    in the snapshot, and are cut to limits.MAX_LABEL: every block row repeats its state."""
    for segment in segments:
        _check_dict(segment, "a segment", name)
    block_rows = [row for i, seg in enumerate(segments) for row in _block_rows(i, seg, name)]
    blocks = _blocks_table(block_rows, interner)
    return _segments_table(segments, block_rows, interner, name), blocks


def _check_dict(value: object, what: str, name: str) -> None:
    if type(value) is not dict:
        raise InputError(name, f"not a PyTorch memory snapshot: {what} is {kind_of(value)}, not a dict")


def _block_rows(segment_id: int, segment: Segment, name: str) -> list[tuple[Any, ...]]:
    """(segment_id, address, offset, size, requested, state, frames) per block, legacy shapes included."""
    base = int(segment.get("address", 0))
    rows = []
    blocks = segment.get("blocks") or []
    if type(blocks) is not list:
        raise InputError(name, f"not a PyTorch memory snapshot: a segment's 'blocks' is {kind_of(blocks)}, not a list")
    for block in blocks:
        _check_dict(block, "a block", name)
    for block, address in zip(blocks, block_addresses_from_offsets(segment), strict=True):
        if "frames" in block or "history" not in block:
            frames, requested = block.get("frames") or [], int(block.get("requested_size", block["size"]))
        else:
            frames, requested = block_frames_and_request(block)
        rows.append(
            (
                segment_id,
                address,
                address - base,
                int(block["size"]),
                requested,
                block_state(text_value(block.get("state", "inactive"), "state", "a block's", name)),
                frames,
            )
        )
    return rows


def _blocks_table(rows: list[tuple[Any, ...]], interner: StackInterner) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [()] * 7
    return pa.table(
        {
            "block_id": pa.array(range(len(rows)), pa.int32()),
            "segment_id": pa.array(columns[0], pa.int32()),
            "address": pa.array(columns[1], pa.int64()),
            "offset_bytes": pa.array(columns[2], pa.int64()),
            "size": pa.array(columns[3], pa.int64()),
            "requested_size": pa.array(columns[4], pa.int64()),
            "state": pa.array(columns[5], pa.string()),
            "stack_id": pa.array(interner.intern_all(columns[6]), pa.int32()),
        }
    )


def _segments_table(
    segments: list[Segment], block_rows: list[tuple[Any, ...]], interner: StackInterner, name: str
) -> pa.Table:
    sums = _block_sums(len(segments), block_rows)
    pools = [pool_id_pair(s.get("segment_pool_id")) for s in segments]
    kinds = [text_value(s.get("segment_type", "large"), "segment_type", "a segment's", name) for s in segments]
    return pa.table(
        {
            "segment_id": pa.array(range(len(segments)), pa.int32()),
            "device": pa.array([int(s.get("device", 0)) for s in segments], pa.int32()),
            "address": pa.array([int(s["address"]) for s in segments], pa.int64()),
            "total_size": pa.array([int(s["total_size"]) for s in segments], pa.int64()),
            "allocated_size": pa.array(
                [_int(s, "allocated_size", sums[i][0]) for i, s in enumerate(segments)], pa.int64()
            ),
            "active_size": pa.array([_int(s, "active_size", sums[i][1]) for i, s in enumerate(segments)], pa.int64()),
            "requested_size": pa.array(
                [_int(s, "requested_size", sums[i][2]) for i, s in enumerate(segments)], pa.int64()
            ),
            "stream": pa.array([int(s.get("stream", 0)) for s in segments], pa.int64()),
            "segment_type": pa.array(kinds, pa.string()),
            "pool_owner": pa.array([p[0] for p in pools], pa.int64()),
            "pool_id": pa.array([p[1] for p in pools], pa.int64()),
            "pool": pa.array([_pool_name(kind, pool) for kind, pool in zip(kinds, pools, strict=True)], pa.string()),
            "is_expandable": pa.array([bool(s.get("is_expandable", False)) for s in segments], pa.bool_()),
            "stack_id": pa.array(interner.intern_all(s.get("frames") for s in segments), pa.int32()),
        }
    )


def _block_sums(count: int, rows: list[tuple[Any, ...]]) -> list[list[int]]:
    """Allocated, active and requested bytes per segment, for shapes that do not record them."""
    sums = [[0, 0, 0] for _ in range(count)]
    for segment_id, _addr, _off, size, requested, state, _frames in rows:
        if state == "active_allocated":
            sums[segment_id][0] += size
            sums[segment_id][2] += requested
        if state != "inactive":
            sums[segment_id][1] += size
    return sums


def _int(mapping: dict[str, Any], key: str, default: int) -> int:
    value = mapping.get(key)
    return default if value is None else int(value)


def _pool_name(segment_type: str, pool: tuple[int, int]) -> str:
    """small / large for the default pools; private for a pool of its own (CUDA graphs, MemPool)."""
    return "private" if pool != (0, 0) else segment_type
