"""Shared helpers for the snapshot tests: the real H200 captures, read once per test session."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from oomlab.load.snapshot import inspect_connection
from oomlab.parse.snapshot.read import SnapshotData, read_snapshot
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
