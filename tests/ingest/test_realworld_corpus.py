"""Every artifact of the real-world corpus (tests/cases/realworld/, each with the URL it was copied from)
lands with the facts its case.json states; the few that do not yet are listed, with the reason, in
its family's known_misses.json, and a listed case that lands fails too, so the list only shrinks. bench/corpus.py prints
the landing rate."""

from __future__ import annotations

import pytest
from corpus import Case, cases, check_case, ingest_case, known_misses

from oomlab.parse.text import needles

CASES = cases()
MISSES = known_misses()


def test_the_corpus_is_there() -> None:
    assert CASES, "no case under tests/cases/realworld"
    assert set(MISSES) <= {c.name for c in CASES}, "a known_misses.json names a case that does not exist"
    for case in CASES:
        assert str(case.spec.get("source", "")).startswith("http"), f"{case.name}: no source URL"


@pytest.mark.parametrize("search", ["markers", "needles"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_lands_with_its_facts(case: Case, search: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each case's text searched by rg for the readers' markers, as a small log is, and for needles chosen from
    the case itself, as a large log is (tests/parse/test_needles.py)."""
    if search == "needles":
        monkeypatch.setattr(needles, "CHOOSE_FROM_BYTES", 0)
    con = ingest_case(case, tmp_path / "case.duckdb")
    try:
        problems = check_case(case, con)
    finally:
        con.close()
    if case.name in MISSES:
        assert problems, f"{case.name} lands now: remove it from its family's known_misses.json"
        pytest.xfail(MISSES[case.name])
    assert problems == []
