"""A version whose leak is fast on busy hosts and slow on quiet ones (issue 35, found on the harness's fleet 77319,
`python bench/truth.py --fleets 30 --seed 77300`): agent-4b-v1.0 leaks 30-36 MB/h on node-c-1/2 and 8-9 MB/h on
node-b-1/2, which crash and restart often for other causes. Two node-c lifetimes grew 414 and 519 MiB (leaks);
the node-b lifetimes climbed as steadily (R^2 0.91-1.00) but stopped short of the 64 MiB floor, and were counted
against the version, whose leak (0 OOMs of its own) was then missed. A lifetime that climbs like a leak but is too
short to reach the floor is no evidence against one."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import truth


def test_a_leak_slower_on_quiet_hosts_is_still_the_versions_leak(tmp_path):
    truths, findings, _ = truth.run_fleet(77319, tmp_path)
    planted = [c for c in truths["causes"] if c["kind"] == "leak"]
    assert [(c["subject"], c["ooms"]) for c in planted] == [("model_version agent-4b-v1.0", 0)]
    rates = planted[0]["bytes_per_hour"]
    assert max(rates.values()) > 3 * min(rates.values())  # the shape this case is about
    leaks = [f for f in findings if f["kind"] == "leak"]
    assert [f["subject"] for f in leaks] == ["model_version agent-4b-v1.0"]
