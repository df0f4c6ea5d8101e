"""One finding per cause and scope: the same story on many hosts is one finding that lists them."""

from __future__ import annotations

from datetime import datetime

import pytest

from oomlab.findings import sizing as sizing_findings
from oomlab.findings.collect import collect_findings
from oomlab.findings.finding import Finding, Window
from oomlab.findings.grouping import group_by_scope


@pytest.fixture(scope="module")
def collected(fleet_con) -> list[Finding]:
    return collect_findings(fleet_con)


def test_the_a10_hosts_that_outgrow_their_card_are_one_story(fleet_con, collected) -> None:
    # what the sizing rule says host by host on the bundled fleet
    upgrades = [f for f in sizing_findings.findings(fleet_con) if f.metrics["action"] == "upgrade"]
    a10 = sorted(f.metrics["instance"] for f in upgrades if f.metrics["card"] == "A10 24 GB")
    assert a10 == ["a10-01", "a10-02", "a10-03", "a10-04", "a10-05"]
    # ... is one sizing group, folded into the prompt threshold of the same card (the cause: these
    # requests outgrow a 24 GB card; cap them there, or move to the card the sizing rule names)
    (card,) = [f for f in collected if f.kind == "prompt_threshold" and f.subject == "A10 24 GB"]
    (group,) = [r for r in card.metrics["related"] if r["kind"] == "sizing"]
    assert group["subject"] == "5 hosts on A10 24 GB: a10-05, a10-01, a10-04, a10-03, ..."
    assert sorted(group["metrics"]["hosts"]) == a10
    assert {"action": "upgrade", "card": "A10 24 GB", "target_card": "V100 32 GB"}.items() <= group["metrics"].items()
    per_host = group["metrics"]["per_host"]
    assert [h["metrics"]["instance"] for h in per_host] == group["metrics"]["hosts"]
    assert card.impact >= sum(h["impact"] for h in per_host) == sum(h["metrics"]["ooms_in_lookback"] for h in per_host)
    assert not [f for f in collected if f.kind == "sizing" and f.metrics.get("action") == "upgrade"]


def test_the_first_five_findings_are_five_stories(collected) -> None:
    top = collected[:5]
    assert [f.kind for f in top] == ["prompt_threshold", "leak", "scheduled_job", "fragmentation", "external_pressure"]
    # a100-05's card full of reserved-but-unallocated memory: the fragmentation and the sizing rule's
    # "fix the allocator first" are one story
    (a100,) = [f for f in top if f.subject == "instance a100-05"]
    assert [(r["kind"], r["metrics"]["action"]) for r in a100.metrics["related"]] == [("sizing", "fix_allocator")]


def test_the_two_fragmenting_h200_captures_are_one_finding(demo_result) -> None:
    # the demo also ingests the real fragmentation captures' OOM messages: same cause, same capped card
    from oomlab import api

    fragmentation = [f for f in api.findings(demo_result.db_path) if f.kind == "fragmentation"]
    (h200,) = [f for f in fragmentation if "hosts" in f.metrics]
    assert h200.metrics["hosts"] == ["h200-frag", "h200-frag-expandable"]
    assert h200.subject.startswith("2 hosts on 139.80 GiB capped at 4.00 GiB: ")
    assert "on h200-frag, h200-frag-expandable;" in h200.advice
    assert (
        h200.impact
        == sum(h["impact"] for h in h200.metrics["per_host"])
        == sum(h["metrics"]["ooms"] for h in h200.metrics["per_host"])
    )


def _sizing(host: str, impact: float, confidence: float, day: int, card: str = "A10 24 GB") -> Finding:
    metrics = {"instance": host, "gpu_index": 0, "card": card, "action": "upgrade", "peak_level": impact / 100}
    window = Window(datetime(2026, 11, day), datetime(2026, 11, day + 1))
    advice = f"Move {host} to a larger card"
    return Finding("sizing", host, f"{host} peaked", advice, confidence, impact, window, metrics)


def test_a_group_sums_impact_weights_confidence_and_spans_its_members() -> None:
    found = [_sizing(f"a10-0{i}", 10.0 * i, 0.3 + i / 10, i) for i in range(1, 7)]
    found.append(_sizing("a100-01", 50.0, 0.8, 3, card="A100 80 GB"))  # another card: its own story
    groups = group_by_scope(found)
    assert len(groups) == 2
    group = next(g for g in groups if "hosts" in g.metrics)
    assert group.subject == "6 hosts on A10 24 GB: a10-06, a10-05, a10-04, a10-03, ..."
    assert group.impact == 210.0
    assert group.confidence == round(sum(10 * i * (0.3 + i / 10) for i in range(1, 7)) / 210, 2)
    assert group.window == Window(datetime(2026, 11, 1), datetime(2026, 11, 7))
    assert group.advice == "Move a10-06, a10-05, a10-04, a10-03, a10-02, a10-01 to a larger card"
    # what the hosts share stays on top; what differs is per host
    assert group.metrics["card"] == "A10 24 GB" and "peak_level" not in group.metrics
    assert [h["metrics"]["peak_level"] for h in group.metrics["per_host"]] == [0.6, 0.5, 0.4, 0.3, 0.2, 0.1]
    assert next(g for g in groups if "hosts" not in g.metrics).subject == "a100-01"
