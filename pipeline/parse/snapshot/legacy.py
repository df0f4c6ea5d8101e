"""Older shapes of PyTorch memory snapshots, each turned into the current shape by one small function."""

from __future__ import annotations

from typing import Any

from ...errors import InputError
from .limits import bounded_text

Block = dict[str, Any]
Segment = dict[str, Any]

# Spellings of the state of a block freed on one stream but still in use on another.
_STATE_RENAMES = {"active_awaiting_free": "active_pending_free"}
_WRONG_SHAPE_HINT = "expected the pickle of torch.cuda.memory._snapshot() / _dump_snapshot()"


def snapshot_root(obj: object, name: str) -> tuple[dict[str, Any], list[str]]:
    """The snapshot as a dict with `segments`, and the legacy shapes it was converted from."""
    if isinstance(obj, dict) and isinstance(obj.get("segments"), list):
        return obj, []
    if isinstance(obj, list) and obj and all(_looks_like_segment(s) for s in obj[:8]):
        return root_from_bare_segment_list(obj), ["bare_segment_list"]
    raise InputError(name, f"not a PyTorch memory snapshot: {_describe(obj)}", hint=_WRONG_SHAPE_HINT)


def root_from_bare_segment_list(segments: list[Segment]) -> dict[str, Any]:
    """Before device traces (PyTorch 1.13), `_snapshot()` returned the list of segments alone."""
    return {"segments": segments, "device_traces": []}


def block_frames_and_request(block: Block) -> tuple[list[dict[str, Any]], int]:
    """Frames and requested size from a block with `history` (before 2.1), as the viewer reads them."""
    history = block.get("history") or []
    if not history:
        return [], int(block.get("size", 0))
    first = history[0]
    return list(first.get("frames") or []), int(first.get("real_size", block.get("size", 0)))


def block_state(state: object) -> str:
    """The current spelling of a block state."""
    text = str(state)
    return _STATE_RENAMES.get(text, text)


def block_addresses_from_offsets(segment: Segment) -> list[int]:
    """Addresses of blocks that do not carry one (1.13): they tile the segment in order."""
    address, addresses = int(segment.get("address", 0)), []
    for block in segment.get("blocks") or []:
        addresses.append(int(block["address"]) if "address" in block else address)
        address = addresses[-1] + int(block.get("size", 0))
    return addresses


def pool_id_pair(value: object) -> tuple[int, int]:
    """`segment_pool_id` as two ints: a tuple in pickles, a list in JSON, absent before 2.1 (default pool)."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return int(value[0]), int(value[1])
    return 0, 0


def _looks_like_segment(value: object) -> bool:
    return isinstance(value, dict) and "blocks" in value and "total_size" in value


def _describe(obj: object) -> str:
    """What the object is, for the wrong-shape message."""
    if isinstance(obj, dict):
        # Only text keys are named, each cut short: str() of a key that is a shared tuple never ends.
        text = sorted(bounded_text(k, 40) for k in obj if type(k) is str)[:5]
        others = sum(1 for k in obj if type(k) is not str)
        keys = ", ".join(text + ([f"{others} keys that are not text"] if others else [])) or "no keys"
        return f"a dict without a 'segments' list (keys: {keys})"
    if isinstance(obj, list):
        return "an empty list" if not obj else "a list that is not a list of segments"
    return f"a pickled {type(obj).__name__}, expected a dict with 'segments' or a list of segments"
