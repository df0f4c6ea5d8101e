"""The views and findings of the bundled sample data match the committed golden outputs.

A difference names the view (or finding), the rows by key and the columns; if the change is intended,
regenerate with `python tests/golden/regenerate.py` and commit tests/golden/ with the change (README.md).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest
from golden_spec import (
    ABS_TOL,
    FINDINGS_FILE,
    REGENERATE,
    REL_TOL,
    VIEWS,
    VIEWS_DIR,
    GoldenView,
    connect,
    findings_json,
    frame_differences,
    golden_file,
    ingest_samples,
    json_differences,
    read_view,
)
from polars.testing import assert_frame_equal

ROOT = Path(__file__).parent.parent.parent
HINT = f"If the change is intended, regenerate with `{REGENERATE}` and commit tests/golden/ with it."

# polars renamed rtol/atol to rel_tol/abs_tol; pyproject allows versions on both sides of the rename.
_TOLERANCE = (
    {"rel_tol": REL_TOL, "abs_tol": ABS_TOL}
    if "rel_tol" in inspect.signature(assert_frame_equal).parameters
    else {"rtol": REL_TOL, "atol": ABS_TOL}
)


# The bundled sample data ingested once per session, as `oomlab demo` does (fixtures here rather than in a
# conftest.py of this folder: a second conftest module would shadow tests/conftest.py for `from conftest import`).
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


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: v.name)
def test_view_matches_golden(view: GoldenView, golden_con: duckdb.DuckDBPyConnection) -> None:
    path = golden_file(view)
    if not path.exists():
        pytest.fail(f"no golden file {path.relative_to(ROOT)} for view {view.name}. {HINT}", pytrace=False)
    expected, actual = pl.read_parquet(path), read_view(golden_con, view)
    try:
        assert_frame_equal(expected, actual, check_exact=False, **_TOLERANCE)
    except AssertionError as exc:
        verdict = str(exc).splitlines()[0]  # what polars found first; its Series dumps after that are cut
    else:
        return
    details = frame_differences(expected, actual, view.key) or "(no value differs by key: see polars below)"
    pytest.fail(
        f"view {view.name} differs from {path.relative_to(ROOT)} (rows by {', '.join(view.key)}):\n"
        f"{details}\npolars: {verdict}\n{HINT}",
        pytrace=False,
    )


def test_findings_match_golden(golden_db: Path) -> None:
    expected = json.loads(FINDINGS_FILE.read_text(encoding="utf-8"))
    differences = list(json_differences(expected, findings_json(golden_db)))
    if differences:
        shown = "\n".join(f"  {d}" for d in differences[:20])
        more = f"\n  ... and {len(differences) - 20} more" if len(differences) > 20 else ""
        pytest.fail(
            f"findings differ from {FINDINGS_FILE.relative_to(ROOT)} in {len(differences)} places:\n{shown}{more}\n"
            f"{HINT}",
            pytrace=False,
        )


def test_golden_folder_holds_the_listed_views() -> None:
    stored = {p.stem for p in VIEWS_DIR.glob("*.parquet")}
    listed = {v.name for v in VIEWS}
    assert stored == listed, f"not stored: {sorted(listed - stored)}, not listed: {sorted(stored - listed)}. {HINT}"
