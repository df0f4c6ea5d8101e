"""The allocator's block layout at an earlier moment, undone event by event from a snapshot's final state."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from ...load.settings import BLOCK_ROUNDING_BYTES

# Undoing a segment event reverses what it did: +1 means the event had mapped `size` bytes.
_RESERVED_EFFECT = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}


def block_size_of(requested: int) -> int:
    """The block size the allocator gives a request: a block event carries the requested size, rounded up to
    BLOCK_ROUNDING_BYTES (kMinBlockSize), ignoring an unsplit large-pool remainder."""
    return -(-requested // BLOCK_ROUNDING_BYTES) * BLOCK_ROUNDING_BYTES


@dataclass(frozen=True)
class LayoutState:
    """Totals and the largest free block at one moment."""

    allocated_bytes: int
    active_bytes: int
    reserved_bytes: int
    largest_free_block_bytes: int

    @property
    def reserved_unallocated_bytes(self) -> int:
        return self.reserved_bytes - self.allocated_bytes


class LayoutReplay:
    """Segments (as address ranges) and active blocks, replayed backwards one trace event at a time."""

    def __init__(self, ranges: list[tuple[int, int, bool]], active: dict[int, int], allocated_bytes: int) -> None:
        """`ranges`: (address, size, expandable) per final segment; `active`: address -> active block size."""
        self._ranges: dict[int, tuple[int, bool]] = {addr: (addr + size, exp) for addr, size, exp in ranges}
        self._active = dict(active)
        self._allocated = allocated_bytes

    def undo(self, action: str, addr: int | None, size: int) -> None:
        """Put the layout back to how it was before this event."""
        if action == "alloc":
            # The block's own size when the final state (or a later undo) knows it, else the rounded request.
            self._allocated -= self._active.pop(addr, None) or block_size_of(size)  # type: ignore[arg-type]
            return
        if action in ("free_requested", "free"):
            self._allocated += block_size_of(size)
        if action in ("free_completed", "free") and addr is not None:
            self._active[addr] = block_size_of(size)
        elif _RESERVED_EFFECT.get(action) == 1 and addr is not None:
            self._remove_range(addr, size)
        elif _RESERVED_EFFECT.get(action) == -1 and addr is not None:
            self._ranges[addr] = (addr + size, action == "segment_unmap")

    def state(self) -> LayoutState:
        """Totals now, and the largest gap between active blocks inside the mapped ranges."""
        reserved = sum(end - start for start, (end, _exp) in self._ranges.items())
        return LayoutState(self._allocated, sum(self._active.values()), reserved, self._largest_gap())

    def _remove_range(self, addr: int, size: int) -> None:
        """Unmap [addr, addr+size): drop a whole segment, or cut a piece out of an expandable one."""
        for start, (end, expandable) in list(self._ranges.items()):
            if start <= addr < end:
                del self._ranges[start]
                if start < addr:
                    self._ranges[start] = (addr, expandable)
                if addr + size < end:
                    self._ranges[addr + size] = (end, expandable)
                return

    def _merged_ranges(self) -> list[tuple[int, int]]:
        """Ranges sorted by address; adjacent pieces of expandable segments form one range."""
        merged: list[list[int]] = []
        last_expandable = False
        for start in sorted(self._ranges):
            end, expandable = self._ranges[start]
            if merged and expandable and last_expandable and merged[-1][1] == start:
                merged[-1][1] = end
            else:
                merged.append([start, end])
            last_expandable = expandable
        return [(start, end) for start, end in merged]

    def _largest_gap(self) -> int:
        blocks = sorted(self._active.items())
        starts = [addr for addr, _size in blocks]
        largest = 0
        for start, end in self._merged_ranges():
            cursor = start
            for i in range(bisect.bisect_left(starts, start), bisect.bisect_left(starts, end)):
                largest = max(largest, starts[i] - cursor)
                cursor = max(cursor, starts[i] + blocks[i][1])
            largest = max(largest, end - cursor)
        return largest
