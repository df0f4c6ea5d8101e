"""bench/truth.py's scoring: a hand-checked findings list against a hand-written truths file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import truth

A10 = 23_581_097_984


def _cause(kind: str, subject: str, match: dict, required: bool = True, ooms: int = 20) -> dict:
    return {"kind": kind, "subject": subject, "match": match, "required": required, "ooms": ooms}


TRUTHS = {
    "causes": [
        _cause("leak", "model_version chat-7b-v1.1", {"model_version": "chat-7b-v1.1"}),
        _cause("leak", "model_version coder-1b-v2.0", {"model_version": "coder-1b-v2.0"}, ooms=0),
        _cause("scheduled_job", "job reindex", {"job": "reindex"}),
        _cause("external_pressure", "job reindex", {"job": "reindex"}),
        _cause("external_pressure", "instance a10-03", {"instance": "a10-03"}),
        _cause("fragmentation", "instance h200-01", {"instance": "h200-01"}, required=False, ooms=3),
        _cause(
            "prompt_threshold",
            "card 21.96 GiB, model_version chat-7b-v1.1",
            {"device_total": A10, "model_version": "chat-7b-v1.1"},
        ),
        _cause("capacity", "card 21.96 GiB", {"device_total": A10}),
    ],
    "decoys": [{"name": "log-rotate"}, {"name": "disk-scrub"}],
}


def _finding(kind: str, subject: str, **metrics: object) -> dict:
    return {"kind": kind, "subject": subject, "metrics": metrics}


FINDINGS = [
    # a threshold for the whole card, with the capacity finding merged into it: two true positives
    _finding(
        "prompt_threshold",
        "A10 24 GB",
        device_total=A10,
        model_version=None,
        related=[_finding("capacity", "card 21.96 GiB", card="21.96 GiB")],
    ),
    _finding("leak", "model_version chat-7b-v1.1", model_version="chat-7b-v1.1"),
    _finding("leak", "model_version chat-7b-v1.0", model_version="chat-7b-v1.0"),  # not the leaking version
    _finding("scheduled_job", "job reindex", related=[_finding("external_pressure", "job reindex", job="reindex")]),
    _finding("scheduled_job", "job log-rotate", name="log-rotate"),  # a decoy: false positive and blamed
    _finding("external_pressure", "neighbour on instance a10-01", job=None),  # the wrong host
    _finding("fragmentation", "instance h200-01"),  # an optional cause: neither right nor wrong
    _finding("sizing", "a10-01"),  # not a cause kind
    _finding("periodic_window", "window 01:00-02:00 UTC on a10-01"),
]


def test_hand_checked_score() -> None:
    score = truth.score(TRUTHS, FINDINGS)
    got = {k: (c.planted, c.found, c.findings, c.true_positives) for k, c in score.kinds.items()}
    assert got == {
        "leak": (2, 1, 2, 1),
        "scheduled_job": (1, 1, 2, 1),
        "external_pressure": (2, 1, 2, 1),
        "fragmentation": (0, 0, 0, 0),
        "prompt_threshold": (1, 1, 1, 1),
        "capacity": (1, 1, 1, 1),
    }
    total = score.total
    assert (total.planted, total.found, total.findings, total.true_positives) == (7, 5, 8, 5)
    assert score.decoys == 1 and score.blamed == ["scheduled_job job log-rotate (decoy log-rotate)"]
    assert score.missed == ["leak model_version coder-1b-v2.0 (0 OOMs)", "external_pressure instance a10-03 (20 OOMs)"]
    assert sorted(score.false_positives) == [
        "external_pressure neighbour on instance a10-01",
        "leak model_version chat-7b-v1.0",
        "scheduled_job job log-rotate",
    ]


def test_a_threshold_per_version_matches_only_its_version() -> None:
    other = _finding("prompt_threshold", "A10 24 GB, chat-7b-v1.0", device_total=A10, model_version="chat-7b-v1.0")
    mine = _finding("prompt_threshold", "A10 24 GB, chat-7b-v1.1", device_total=A10, model_version="chat-7b-v1.1")
    elsewhere = _finding("prompt_threshold", "A100 80 GB", device_total=84_976_271_360, model_version=None)
    kinds = truth.score(TRUTHS, [other, mine, elsewhere]).kinds["prompt_threshold"]
    assert (kinds.found, kinds.findings, kinds.true_positives) == (1, 3, 1)


def test_a_decoy_named_in_a_merged_finding_counts() -> None:
    merged = _finding("scheduled_job", "job reindex", related=[_finding("external_pressure", "job disk-scrub")])
    score = truth.score(TRUTHS, [merged])
    assert score.decoys == 1 and score.kinds["external_pressure"].findings == 1
    assert score.kinds["external_pressure"].true_positives == 0


def test_the_last_line_and_the_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    instances = [{"name": "a10-01"}]
    counts = {"requests": 10, "requests_in_text_logs": 0, "oom_events": 1}
    fleet = {**TRUTHS, "instances": instances, "counts": counts}
    monkeypatch.setattr(truth, "run_fleet", lambda seed, work, shapes=(): (fleet, FINDINGS, "0 s"))
    assert truth.main(["--fleets", "2", "--seed", "5", "--dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # two identical fleets: 10 of 16 findings right, 10 of 14 causes found
    assert lines[-1] == "truth: precision 0.62 recall 0.71 decoys 2 over 2 fleets (seed 5)"
    row = next(line for line in lines if line.startswith("leak "))
    # the leak's finding states no OOM count (metrics.leak_ooms): counted, and failed
    assert row.split() == ["leak", "4", "2", "4", "2", "0.50", "0.50", "40", "0", "-100.0%", "0/2"]
    assert "  count: leak model_version chat-7b-v1.1: no OOM count stated (leak_ooms), 20 planted" in lines
    assert (
        "counts: 0 of 10 found causes within 5% of the OOMs planted (10 off or not stated, 0 of them within what "
        "the requests at a cause's edge allow)"
    ) in lines


def test_nothing_to_measure_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    empty = {
        "causes": [_cause("leak", "model_version x", {"model_version": "x"}, required=False)],
        "decoys": [],
        "instances": [],
        "counts": {"requests": 0, "requests_in_text_logs": 0, "oom_events": 0},
    }
    monkeypatch.setattr(truth, "run_fleet", lambda seed, work, shapes=(): (empty, FINDINGS, "0 s"))
    assert truth.main(["--fleets", "1", "--dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "truth: precision" not in captured.out and "recall cannot be measured" in captured.err


def test_each_found_cause_s_oom_count_against_the_planted_count() -> None:
    truths = {
        "causes": [
            _cause("leak", "model_version chat-7b-v1.1", {"model_version": "chat-7b-v1.1"}, ooms=100),
            _cause("scheduled_job", "job reindex", {"job": "reindex"}, ooms=40),
            _cause("capacity", "card 21.96 GiB", {"device_total": A10}, ooms=50),
            _cause("prompt_threshold", "A10, v1.0", {"device_total": A10, "model_version": "v1.0"}, ooms=30),
            _cause("prompt_threshold", "A10, v1.1", {"device_total": A10, "model_version": "v1.1"}, False, ooms=5),
        ],
        "decoys": [],
    }
    findings = [
        _finding("leak", "model_version chat-7b-v1.1", leak_ooms=104),  # +4 %: within 5 %
        _finding("scheduled_job", "job reindex", ooms_in=80),  # every OOM counted twice (two logs)
        _finding("capacity", "card 21.96 GiB", card="21.96 GiB"),  # states no count
        # one threshold for the whole card speaks for both versions' thresholds (35 planted)
        _finding("prompt_threshold", "A10 24 GB", device_total=A10, model_version=None, ooms_by_size=35),
    ]
    score = truth.score(truths, findings)
    got = {(c.kind, c.planted, c.found, c.ok) for c in score.counts}
    assert got == {
        ("leak", 100, 104, True),
        ("scheduled_job", 40, 80, False),
        ("capacity", 50, None, False),
        ("prompt_threshold", 35, 35, True),
    }
    assert score.kinds["scheduled_job"].counted == 1 and score.kinds["scheduled_job"].counts_ok == 0
    threshold = next(c for c in score.counts if c.kind == "prompt_threshold")
    assert threshold.subject == "A10, v1.0 and 1 more causes of its finding"
    assert [c.line() for c in score.counts if c.kind == "scheduled_job"] == [
        "scheduled_job job reindex: 80 OOMs found, 40 planted (+100.0%, off by more than 5%)"
    ]
    row = next(r for r in truth.table(score) if r.startswith("all "))
    assert row.split()[-4:] == ["225", "219", "-2.7%", "2/4"]


def test_a_count_off_only_by_requests_at_a_causes_edge_says_so_and_still_fails() -> None:
    """Fleet 97305 (`bench/truth.py --seed 97300`): a leak planted with 2 OOMs was found with 1; the other needed
    0.21 % more than the largest peak the card served, within the 0.4 % sd of a request's own bytes per token, and
    went to capacity. Its truths' ooms_range [1, 2] says a count of 1 is what no log can settle; a count outside
    the range, or with no range stated, is plainly off."""
    leak = {"model_version": "agent-849m-v2.3"}
    truths = {
        "causes": [
            {**_cause("leak", "model_version agent-849m-v2.3", leak, ooms=2), "ooms_range": [1, 2]},
            {**_cause("capacity", "card 21.96 GiB", {"device_total": A10}, ooms=497), "ooms_range": [495, 498]},
            _cause("scheduled_job", "job reindex", {"job": "reindex"}, ooms=40),
        ],
        "decoys": [],
    }
    findings = [
        _finding("leak", "model_version agent-849m-v2.3", leak_ooms=1),
        _finding("capacity", "card 21.96 GiB", card="21.96 GiB", ooms=530),
        _finding("scheduled_job", "job reindex", ooms_in=30),
    ]
    score = truth.score(truths, findings)
    got = {(c.kind, c.edges, c.ok, c.at_edge) for c in score.counts}
    assert got == {
        ("leak", (1, 2), False, True),
        ("capacity", (495, 498), False, False),  # 530 is beyond 498 + 5 %
        ("scheduled_job", None, False, False),
    }
    (line,) = [c.line() for c in score.counts if c.kind == "leak"]
    assert line.endswith("(-50.0%, off by more than 5%; 1 to 2 with the requests at a cause's edge on either side)")
    assert score.total.counts_ok == 0 and score.total.counts_at_edge == 1


def test_a_device_is_its_node_or_gpu_uuid_never_a_pod() -> None:
    uuid = "GPU-fae2783d-8ffe-d2bb-3d16-afcc42bf1df9"
    truths = {
        "causes": [
            _cause("fragmentation", "instance node-b-3", {"instance": "node-b-3", "gpu_uuid": uuid}),
            _cause("external_pressure", "instance node-a-1", {"instance": "node-a-1"}),
        ],
        "decoys": [],
    }
    findings = [
        _finding("fragmentation", f"instance {uuid}", ooms=20),
        _finding("external_pressure", "neighbour on instance node-a-1", ooms=20),
        _finding("external_pressure", "neighbour on instance chat-infer-7c9f8d6b45-xk2p9", ooms=3),  # a pod
    ]
    score = truth.score(truths, findings)
    assert score.missed == [] and score.false_positives == [
        "external_pressure neighbour on instance chat-infer-7c9f8d6b45-xk2p9"
    ]


def test_a_card_total_read_from_a_gib_field_matches_within_its_rounding() -> None:
    truths = {"causes": [_cause("prompt_threshold", "L40S", {"device_total": 47_697_362_944, "model_version": "x"})]}
    near = _finding("prompt_threshold", "L40S", device_total=round(44.42 * (1 << 30)), model_version="x")
    other = _finding("prompt_threshold", "L40S", device_total=round(44.52 * (1 << 30)), model_version="x")
    assert truth.score(truths, [near]).kinds["prompt_threshold"].true_positives == 1
    assert truth.score(truths, [other]).kinds["prompt_threshold"].true_positives == 0


@pytest.mark.parametrize(
    ("flags", "options"),
    [([], ()), (["--classic"], ("--classic",)), (["--shapes", "units,echo"], ("--shapes=units,echo",))],
)
def test_the_shape_flags_reach_the_generator(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flags: list[str], options: tuple[str, ...]
) -> None:
    seen = []
    fleet = {**TRUTHS, "instances": [], "counts": {"requests": 1, "requests_in_text_logs": 0, "oom_events": 1}}

    def run(seed: int, work: Path, shapes: tuple[str, ...] = ()) -> tuple:
        seen.append(shapes)
        return fleet, FINDINGS, "0 s"

    monkeypatch.setattr(truth, "run_fleet", run)
    assert truth.main(["--fleets", "1", "--dir", str(tmp_path), *flags]) == 0
    assert seen == [options]


def test_a_shaped_fleet_is_scored_under_each_of_its_shapes(capsys: pytest.CaptureFixture[str]) -> None:
    shaped = {**TRUTHS, "generator": {"shapes": {"drawn": ["kubernetes", "units"]}}}
    fleets = [(shaped, truth.score(shaped, FINDINGS)), (TRUTHS, truth.score(TRUTHS, FINDINGS))]
    rows = {r.split()[0]: r.split()[1:] for r in truth.shape_table(fleets)[1:]}
    assert rows == {
        "classic": ["1", "0.62", "0.71", "0/5", "1"],
        "kubernetes": ["1", "0.62", "0.71", "0/5", "1"],
        "units": ["1", "0.62", "0.71", "0/5", "1"],
    }
