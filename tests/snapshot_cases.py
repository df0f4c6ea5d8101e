"""Shared helpers for the snapshot tests: the real H200 captures, read once per test session."""

from __future__ import annotations

import pickle
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from oomlab.load.snapshot import inspect_connection
from oomlab.parse.snapshot.read import SnapshotData, read_snapshot, snapshot_from_object
from oomlab.parse.snapshot.safe_pickle import load_plain_pickle

DATA = Path(__file__).parent / "data" / "h200"
GIB = 1 << 30
SNAPSHOTS = sorted(DATA.glob("*/snapshot_*.pickle.gz"))


def snapshot_path(scenario: str, name: str = "snapshot_end") -> Path:
    return DATA / scenario / f"{name}.pickle.gz"


@cache
def read_case(scenario: str, name: str = "snapshot_end") -> SnapshotData:
    """The tables of a real capture (cached: several tests read the same file)."""
    return read_snapshot(snapshot_path(scenario, name))


@cache
def case_db(scenario: str, name: str = "snapshot_end") -> duckdb.DuckDBPyConnection:
    """An in-memory database holding one real capture as snapshot 1 (cached; tests only read it)."""
    return inspect_connection(read_case(scenario, name))


def raw_case(scenario: str, name: str = "snapshot_end") -> Any:
    """A fresh copy of the raw snapshot object (safe unpickler), to derive other shapes from."""
    return load_plain_pickle(snapshot_path(scenario, name))


def repeated_trace_pickle(scenario: str, copies: int, path: Path) -> Path:
    """A pickle of the real capture with device 0's trace repeated `copies` times, each copy with new entry dicts
    and frames lists and the frame dicts shared, as torch writes them: a longer trace of the real shape."""
    raw = raw_case(scenario)
    base = raw["device_traces"][0]
    raw["device_traces"][0] = [dict(e, frames=list(e["frames"])) for _ in range(copies) for e in base]
    path.write_bytes(pickle.dumps(raw, protocol=4))
    return path


def cut_trace(scenario: str, name: str, fraction: float) -> Any:
    """The raw real capture with each device's trace cut to its last `fraction` of events (0: no trace at all):
    the same segments and blocks, the ring as a smaller `max_entries` (or history off) would have left it."""
    raw = raw_case(scenario, name)
    for device, entries in enumerate(raw["device_traces"]):
        keep = round(len(entries) * fraction)
        raw["device_traces"][device] = entries[len(entries) - keep :] if keep else []
    return raw


@cache
def cut_db(scenario: str, name: str, fraction: float) -> duckdb.DuckDBPyConnection:
    """An in-memory database holding the capture with its trace cut (`cut_trace`) as snapshot 1 (cached)."""
    label = f"{scenario}/{name} (last {fraction:.0%} of its trace)"
    return inspect_connection(snapshot_from_object(cut_trace(scenario, name, fraction), label))
