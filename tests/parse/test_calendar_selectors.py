"""Calendar host selectors: lists split where a glob has no class, globs kept as written, and a selector a glob
cannot mean as written is a reject naming its line."""

from __future__ import annotations

import json

import pytest

from oomlab.parse.calendar import JobRule, JobWindow, parse_hosts, read_calendar
from oomlab.records import Reject


@pytest.mark.parametrize(
    ("value", "hosts"),
    [
        ("a10-01;a10-02", ("a10-01", "a10-02")),
        ("a10-01, a10-02", ("a10-01", "a10-02")),
        ("a10-01|a10-02", ("a10-01", "a10-02")),
        ("a10-01 a10-02", ("a10-01", "a10-02")),
        (["a10-01", "infer-b-*"], ("a10-01", "infer-b-*")),
        ("infer-b-*", ("infer-b-*",)),
        ("a10-0[1-3] infer-b-?", ("a10-0[1-3]", "infer-b-?")),
        # a separator inside a class is one of its characters, not a list's
        ("a10-0[1,3];a100-0[|2]", ("a10-0[1,3]", "a100-0[|2]")),
        ("gpu-[!ab]-1", ("gpu-[!ab]-1",)),
        ("a[]]b", ("a[]]b",)),
        ("*", None),
        (" ; ", None),
        ("", None),
        (None, None),
    ],
)
def test_hosts_are_kept_as_written(value, hosts):
    assert parse_hosts(value) == hosts


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("a10-0[1-3", "host selector 'a10-0[1-3' has a [ without its ]"),
        ("a10-01;infer-b-[", "host selector 'infer-b-[' has a [ without its ]"),
        ("a10-0[3-1]", "host selector 'a10-0[3-1]' has the empty range 3-1"),
        ("gpu-[!z-a]", "host selector 'gpu-[!z-a]' has the empty range z-a"),
        ("infer\\-b-*", "host selector 'infer\\-b-*' has a backslash; host names have none"),
    ],
)
def test_a_selector_a_glob_cannot_mean_raises(value, reason):
    with pytest.raises(ValueError) as info:
        parse_hosts(value)
    assert str(info.value) == reason


def test_ranges_are_read_as_fnmatch_reads_them():
    # a leading or trailing '-' is a member, and so is one right after a range
    assert parse_hosts("a[-z] b[z-] c[a-c-a]") == ("a[-z]", "b[z-]", "c[a-c-a]")


def test_calendar_rows_with_selectors_load_and_a_bad_one_is_a_reject(tmp_path):
    csv = tmp_path / "calendar.csv"
    csv.write_text(
        "name,start,end,hosts\n"
        "scrub,2026-11-11T14:00:00Z,2026-11-11T15:00:00Z,a10-0[1-3]|infer-b-*\n"
        "broken,2026-11-12T14:00:00Z,2026-11-12T15:00:00Z,a10-0[1-3\n"
    )
    scrub, broken = read_calendar(csv)
    assert isinstance(scrub, JobWindow) and scrub.hosts == ("a10-0[1-3]", "infer-b-*")
    assert isinstance(broken, Reject) and broken.line == 3
    assert broken.reason == "host selector 'a10-0[1-3' has a [ without its ]"
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"name": "backup", "cron": "0 1 * * *", "duration_minutes": 90, "hosts": ["a?0-*"]}]))
    (rule,) = read_calendar(rules)
    assert isinstance(rule, JobRule) and rule.hosts == ("a?0-*",)
