"""The bundled sample data ingested once per session, as `oomlab demo` does, for the golden comparisons."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from golden_spec import connect, ingest_samples


@pytest.fixture(scope="session")
def golden_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh database holding sample_logs/fleet and sample_logs/h200."""
    path = tmp_path_factory.mktemp("golden") / "golden.duckdb"
    ingest_samples(path)
    return path


@pytest.fixture(scope="module")
def golden_con(golden_db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to it, shared by a module's tests."""
    con = connect(golden_db)
    yield con
    con.close()
