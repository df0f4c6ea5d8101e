"""`oomlab findings` on the sample fleet: every planted truth found once, no decoy, the JSON contract."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import duckdb
import polars as pl
import pytest

from oomlab.findings.collect import merge_related
from oomlab.findings.finding import KINDS, Finding, rank

from conftest import FLEET

TRUTHS = json.loads((FLEET / "truths.json").read_text())


@pytest.fixture(scope="module")
def document(fleet_db):
    from click.testing import CliRunner

    from oomlab.cli.main import cli

    result = CliRunner().invoke(cli, ["findings", "--db", str(fleet_db), "--json", "-"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _by_kind(document, kind):
    return [f for f in document["findings"] if f["kind"] == kind]


def test_the_document_has_the_documented_shape(document):
    assert set(document) == {"generated_at", "since", "until", "data_quality", "untimed_left_out", "findings"}
    assert document["data_quality"] is None  # the sample fleet and the real H200 logs: nothing set aside
    assert document["untimed_left_out"] == 0  # no window: every OOM counts
    for finding in document["findings"]:
        assert set(finding) == {
            *("kind", "subject", "window", "metrics", "evidence", "confidence", "advice", "impact"),
            *("title", "summary", "impact_text", "confidence_text", "kind_text"),
        }
        assert finding["title"] and finding["summary"].endswith(".") and finding["impact_text"]
        assert finding["kind"] in KINDS and 0 <= finding["confidence"] <= 1
        assert finding["evidence"] and finding["advice"]
    scores = [f["impact"] * f["confidence"] for f in document["findings"]]
    assert scores == sorted(scores, reverse=True)


def test_the_backup_is_one_finding_with_its_window_and_hosts(document):
    backup = TRUTHS["backup"]
    jobs = _by_kind(document, "scheduled_job")
    assert [f["subject"] for f in jobs] == [f"job {backup['job']}"]
    assert jobs[0]["window"]["recurring"] == f"daily {backup['window_utc']} UTC"
    for host in backup["affected_hosts"]:
        assert host in jobs[0]["advice"]
    assert not any(h in jobs[0]["advice"] for h in backup["unaffected_hosts"])
    # the cause analysis saw the same job through the OOM messages: merged, not listed twice
    assert [r["kind"] for r in jobs[0]["metrics"]["related"]] == ["external_pressure"]
    assert not any(f["subject"] == f"job {backup['job']}" for f in _by_kind(document, "external_pressure"))


def test_no_decoy_is_reported(document):
    text = json.dumps([f for f in document["findings"] if f["kind"] in ("scheduled_job", "periodic_window")])
    assert len(TRUTHS["decoys"]) >= 2
    for decoy in TRUTHS["decoys"]:
        assert decoy["name"] not in text


def test_the_leak_threshold_and_fragmentation_are_found(document):
    leaks = {f["subject"] for f in _by_kind(document, "leak")}
    # the fleet's leaking version, and the real serve_leak capture (llama-mini-v2), also in fleet_db
    assert leaks == {f"model_version {TRUTHS['leak']['model_version']}", "model_version llama-mini-v2"}
    thresholds = _by_kind(document, "prompt_threshold")
    a10 = [f for f in thresholds if f["metrics"]["device_total"] < 30 << 30]
    assert len(a10) == 1
    truth = TRUTHS["prompt_threshold"]
    assert a10[0]["metrics"]["device_total"] == truth["device_total"]
    assert abs(a10[0]["metrics"]["threshold"] / truth["N"] - 1) < 0.01  # requests within ~1 % go either way
    assert [f["subject"] for f in _by_kind(document, "fragmentation")] == [
        f"instance {TRUTHS['fragmentation']['instance']}"
    ]


def _finding(kind, subject, impact, **metrics):
    return Finding(
        kind=kind,
        subject=subject,
        evidence=f"{kind} evidence",
        advice=f"{kind} advice",
        confidence=0.9,
        impact=impact,
        metrics=metrics,
    )


def test_merge_keeps_the_stronger_finding_and_the_others_evidence():
    merged = merge_related(
        rank(
            [
                _finding("external_pressure", "job backup", 50),
                _finding("scheduled_job", "job backup", 40),
                _finding("capacity", "card 21.96 GiB", 30, card="21.96 GiB"),
                _finding("prompt_threshold", "A10 24 GB", 20, device_total=23581097984),
                _finding("leak", "model_version v2", 10),
            ]
        )
    )
    # the prompt threshold keeps the card's story though it ranks lower: it says where to cap
    assert [(f.kind, f.impact) for f in merged] == [("external_pressure", 50), ("prompt_threshold", 30), ("leak", 10)]
    assert merged[0].evidence == "external_pressure evidence Also (scheduled_job): scheduled_job evidence"
    assert merged[1].metrics["related"][0]["kind"] == "capacity"


def test_a_cards_capacity_folds_into_its_top_version_threshold_and_the_others_stay():
    """Fleet 83510 of `bench/truth.py --seed 83500`: a T4 whose capacity finding advised a cap at 105,464 batch x
    tokens beside two thresholds, one per model version, that advised 91,100 and 95,300: three caps for one card's
    requests. The card's story is now told once, by the higher-ranked threshold; the other version keeps its own."""
    t4 = 15837691904
    merged = merge_related(
        rank(
            [
                _finding("capacity", "card 14.75 GiB", 16, card="14.75 GiB"),
                _finding("prompt_threshold", "T4 16 GB, v2.4", 10, device_total=t4, model_version="v2.4"),
                _finding("prompt_threshold", "T4 16 GB, v2.3", 6, device_total=t4, model_version="v2.3"),
                _finding("capacity", "card 21.96 GiB", 5, card="21.96 GiB"),
            ]
        )
    )
    assert [(f.kind, f.subject, f.impact) for f in merged] == [
        ("prompt_threshold", "T4 16 GB, v2.4", 16),
        ("prompt_threshold", "T4 16 GB, v2.3", 6),
        ("capacity", "card 21.96 GiB", 5),
    ]
    assert [r["subject"] for r in merged[0].metrics["related"]] == ["card 14.75 GiB"]
    assert "Also (capacity): capacity evidence" in merged[0].evidence


def test_oom_messages_without_request_sizes_make_no_capacity_finding(tmp_path) -> None:
    """The sample fleet's a10-06 writes only a text log: 54 of its OOMs say little was free and name nobody
    else (rule own_memory: the card's accounting shows only its own memory), which a leak or a passing peak
    explains as well as a request too large for the card. Alone they make no capacity finding (harness fleet
    31026 reported one for its leaking A10s); beside request logs that size requests they join the card's
    (tests/golden). Here the log is cut to its OOMs and the failed requests' lines, as a service that logs only
    its failures writes it (the full log: `test_a_text_logs_request_lines_show_the_cards_edge`)."""
    from oomlab.analyses.fleet.classify import classify_ooms
    from oomlab.findings.causes import capacity_findings

    with gzip.open(FLEET / "textlogs" / "a10-06.log.gz", "rt") as handle:
        kept = [line for line in handle if "done status=200" not in line]
    log = tmp_path / "a10-06.log"
    log.write_text("".join(kept))
    con = _ingested(tmp_path, log)
    try:
        events = classify_ooms(con)
        assert events.filter(pl.col("rule") == "own_memory").height == 54
        assert capacity_findings(con, events) == []
    finally:
        con.close()


def test_a_text_logs_request_lines_show_the_cards_edge(tmp_path) -> None:
    """The same log whole: its request lines (text_requests) say what a10-06 served. Of each version's requests at
    least as large as its smallest capacity OOM, more failed than succeeded: the card's edge in tokens, which a
    leak's failures do not show (tests/analyses/test_served.py). The finding holds the 59 OOMs the sample fleet
    planted as capacity on a10-06 (sample_logs/fleet/oom_causes.csv.gz), and each version's budget is the largest
    request it served there below its smallest failure."""
    from oomlab.analyses.fleet.classify import classify_ooms
    from oomlab.findings.causes import capacity_findings

    con = _ingested(tmp_path, FLEET / "textlogs" / "a10-06.log.gz")
    try:
        (finding,) = capacity_findings(con, classify_ooms(con))
    finally:
        con.close()
    assert finding.metrics["ooms"] == 59
    assert finding.metrics["token_budget_by_model_version"] == {"assist-1.8b-v1.4": 46_384, "assist-1.8b-v1.6": 46_512}
    assert finding.metrics["token_budget"] == 46_384
    assert "on a10-06, 45 requests of assist-1.8b-v1.4 from 46,784 tokens failed while 0 that large succeeded of " in (
        finding.evidence
    )
    assert "14 requests of assist-1.8b-v1.6 from 47,520 tokens failed" in finding.evidence


def _ingested(tmp_path: Path, log: Path) -> duckdb.DuckDBPyConnection:
    from oomlab import api
    from oomlab.config import IngestOptions

    db = tmp_path / "a10-06.duckdb"
    api.ingest(db, [str(log)], IngestOptions())
    return duckdb.connect(str(db), read_only=True)


def test_a_window_says_how_many_ooms_without_a_time_it_left_out(demo_result):
    """The demo's real H200 fragmentation capture logs OOM messages without a time: no window holds them."""
    from click.testing import CliRunner

    from oomlab.cli.main import cli

    con = duckdb.connect(str(demo_result.db_path), read_only=True)
    try:
        (untimed,) = con.execute("SELECT count(*) FROM stg_oom_events WHERE ts IS NULL").fetchone()
    finally:
        con.close()
    assert untimed > 0
    args = ["findings", "--db", str(demo_result.db_path), "--since", "2026-11-01"]
    document = json.loads(CliRunner().invoke(cli, [*args, "--json", "-"]).stdout)
    assert document["untimed_left_out"] == untimed
    shown = CliRunner().invoke(cli, args).stdout
    assert f"{untimed:,} OOMs without a time are outside the window" in " ".join(shown.split())
