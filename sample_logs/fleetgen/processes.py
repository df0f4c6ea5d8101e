"""Process ids on each GPU (service lifetimes and nightly backup runs) and the OOM message of each failure."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .grounding import MemoryModel
from .oom_text import oom_message
from .simulate import Simulated


@dataclass
class Pids:
    """Pids in start order, as Linux hands them out: one per service lifetime, one per backup run."""

    service: list[int]
    backup: dict[int, int]  # backup window index -> pid, on hosts the backup runs on


def assign_pids(seed: int, idx: int, life_starts: list[int], windows: list[tuple[int, int]], backup_host: bool) -> Pids:
    """Increasing pids in the order the processes started."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, idx, 7]))
    events = [(t, 0, i) for i, t in enumerate(life_starts)]
    events += [(a, 1, w) for w, (a, _) in enumerate(windows)] if backup_host else []
    pid = 900 + int(rng.integers(0, 600))
    pids = Pids([], {})
    for _, kind, i in sorted(events):
        pid += int(rng.integers(40, 2400))
        if kind == 0:
            pids.service.append(pid)
        else:
            pids.backup[i] = pid
    return pids


def window_index(ts: np.ndarray, windows: list[tuple[int, int]]) -> np.ndarray:
    """Index of the window each time falls in, -1 outside all of them."""
    if not windows:
        return np.full(len(ts), -1)
    starts = np.array([a for a, _ in windows], dtype=np.int64)
    ends = np.array([b for _, b in windows], dtype=np.int64)
    i = np.searchsorted(starts, ts, side="right") - 1
    inside = (i >= 0) & (ts < ends[np.maximum(i, 0)])
    return np.where(inside, i, -1)


def oom_messages(sim: Simulated, model: MemoryModel, pids: Pids, windows: list[tuple[int, int]]) -> list[str]:
    """The verbatim message of each failed request, in row order."""
    rows = sim.oom_rows
    win = window_index(sim.req.ts[rows], windows)
    out = []
    for k, row in enumerate(rows):
        own = pids.service[sim.life[row]]
        other = None
        if sim.other[row] > 0:
            other = (pids.backup[int(win[k])], int(sim.other[row]))
        reserved = int(sim.oom_reserved[k])
        out.append(
            oom_message(
                int(sim.oom_requested[k]),
                sim.inst.card.device_total,
                int(sim.oom_free[k]),
                reserved + model.non_pytorch,
                int(sim.oom_allocated[k]),
                reserved - int(sim.oom_allocated[k]),
                other,
                other_first=other is not None and other[0] < own,
            )
        )
    return out
