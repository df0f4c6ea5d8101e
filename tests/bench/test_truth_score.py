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
    monkeypatch.setattr(truth, "run_fleet", lambda seed, work: (fleet, FINDINGS, "0 s"))
    assert truth.main(["--fleets", "2", "--seed", "5", "--dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # two identical fleets: 10 of 16 findings right, 10 of 14 causes found
    assert lines[-1] == "truth: precision 0.62 recall 0.71 decoys 2 over 2 fleets (seed 5)"
    row = next(line for line in lines if line.startswith("leak "))
    assert row.split() == ["leak", "4", "2", "4", "2", "0.50", "0.50"]


def test_nothing_to_measure_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    empty = {
        "causes": [_cause("leak", "model_version x", {"model_version": "x"}, required=False)],
        "decoys": [],
        "instances": [],
        "counts": {"requests": 0, "requests_in_text_logs": 0, "oom_events": 0},
    }
    monkeypatch.setattr(truth, "run_fleet", lambda seed, work: (empty, FINDINGS, "0 s"))
    assert truth.main(["--fleets", "1", "--dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "truth: precision" not in captured.out and "recall cannot be measured" in captured.err
