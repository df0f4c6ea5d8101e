"""DuckDB's buffer pool is capped below its own 80 % default (load.connection.memory_limit explains why)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oomlab.errors import DatabaseError
from oomlab.load.connection import MEMORY_LIMIT_ENV, connect

GIB = 1 << 30


def _limit_bytes(db: Path) -> int:
    with connect(db) as con:
        # 'current_setting' prints e.g. '5.8 GiB'; the byte count is in duckdb_settings() as text too
        text = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    number, unit = text.split()
    return int(float(number) * {"MiB": 1 << 20, "GiB": GIB, "TiB": 1 << 40}[unit])


def test_default_is_a_quarter_of_the_machine(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    expected = max(physical // 4, GIB)
    assert abs(_limit_bytes(db) - expected) <= 0.06 * expected  # printed to one decimal of its unit


def test_the_environment_sets_it(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "2GB")
    assert abs(_limit_bytes(db) - 2 * 10**9) <= 0.06 * 2 * 10**9


def test_a_size_duckdb_cannot_read_is_one_clear_error(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "lots")
    with pytest.raises(DatabaseError, match="OOMLAB_MEMORY_LIMIT='lots'"):
        connect(db).close()
