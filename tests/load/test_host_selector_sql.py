"""sql/macros/oomlab_host_matches.sql matches a job's host selectors as Python's fnmatch.fnmatchcase does, for
every selector ingest accepts: exact names, `*`, `?`, `[...]` and `[!...]` classes, case-sensitive."""

from __future__ import annotations

from fnmatch import fnmatchcase

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oomlab.load.sql import sql_text
from oomlab.parse.calendar import check_selector

# Host-name characters and every character a glob gives a meaning to; `\` is rejected at ingest.
ALPHABET = "ab1-.*?[]!^A"


@pytest.fixture(scope="module")
def con():
    con = duckdb.connect()
    con.execute(sql_text("oomlab_host_matches"))
    yield con
    con.close()


def _matches(con, selectors: list[str] | None, host: str) -> bool:
    return con.execute("SELECT oomlab_host_matches($s::VARCHAR[], $h)", {"s": selectors, "h": host}).fetchone()[0]


@pytest.mark.parametrize(
    ("selector", "host", "expected"),
    [
        ("infer-b-*", "infer-b-07", True),
        ("infer-b-*", "infer-a-07", False),
        ("infer-b-*", "infer-b-", True),
        ("a10-0[1-3]", "a10-03", True),
        ("a10-0[1-3]", "a10-04", False),
        ("a10-0[!1-3]", "a10-04", True),
        ("a10-0[1,3]", "a10-0,", True),  # a comma in a class is one of its members
        ("a10-0?", "a10-01", True),
        ("a10-0?", "a10-011", False),
        ("a10-01", "a10-01", True),
        ("a10-01", "A10-01", False),  # case-sensitive, as host names in logs are
        ("a[]]b", "a]b", True),
        ("*", "x/y", True),  # `*` crosses `/`: these are names, not paths
    ],
)
def test_selectors_match_like_fnmatchcase(con, selector, host, expected):
    assert fnmatchcase(host, selector) is expected
    assert _matches(con, [selector], host) is expected


def test_a_list_matches_when_any_selector_does_and_null_is_every_host(con):
    assert _matches(con, ["a10-0[1-3]", "infer-b-*"], "infer-b-2")
    assert not _matches(con, ["a10-0[1-3]", "infer-b-*"], "a100-01")
    assert _matches(con, None, "anything")
    assert not _matches(con, [], "a10-01")


def _accepted(selector: str) -> bool:
    try:
        check_selector(selector)
    except ValueError:
        return False
    return True


@st.composite
def selector_and_host(draw) -> tuple[str, str]:
    """An accepted selector and a host that is random, or the selector with its wildcards filled in (so that
    about half of the pairs match)."""
    selector = draw(st.text(ALPHABET, min_size=1, max_size=8).filter(_accepted))
    if draw(st.booleans()):
        return selector, draw(st.text(ALPHABET, max_size=8))
    filled = [
        draw(st.text(ALPHABET, max_size=3)) if c == "*" else draw(st.sampled_from(ALPHABET)) if c in "?[]!-" else c
        for c in selector
    ]
    return selector, "".join(filled)


@settings(max_examples=500, deadline=None)
@given(pair=selector_and_host())
def test_every_accepted_selector_matches_as_fnmatchcase_does(con, pair):
    selector, host = pair
    assert _matches(con, [selector], host) is fnmatchcase(host, selector)
