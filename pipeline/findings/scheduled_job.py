"""scheduled_job findings: jobs whose windows raise the OOM rate on their hosts, with the numbers that decided it."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from ..analyses.fleet.jobs import MIN_OOMS_INSIDE, host_effects, job_effects
from ..analyses.fleet.rate_tests import format_lift, format_p
from .finding import Finding, Window


def findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """A `scheduled_job` finding for every job whose windows raise the OOM rate on some of its hosts."""
    hosts = host_effects(con, since, until)
    effects = job_effects(con, since, until)
    own = hosts.filter(pl.col("on_job_host")).select(_HOST_TEST_COLUMNS)
    return [
        _finding(row, own.filter(pl.col("name") == row["name"]).drop("name").to_dicts(), _cleared(effects, row))
        for row in effects.filter(pl.col("verdict") == "reported").to_dicts()
    ]


def _cleared(effects: pl.DataFrame, row: dict) -> list[dict]:
    """The jobs not reported some of whose OOM minutes this job explains (it runs then on the same host)."""
    others = effects.filter(
        (pl.col("verdict") != "reported")
        & pl.col("explained_by_jobs").list.contains(row["name"])
        & (pl.col("explained_oom_minutes_in") > 0)
    )
    return others.to_dicts()


# What a finding's metrics["host_tests"] shows of each host the job runs on.
_HOST_TEST_COLUMNS = (
    "name",
    "instance",
    "traffic_source",
    "requests_in",
    "ooms_in",
    "requests_out",
    "ooms_out",
    "intrinsic_in",
    "intrinsic_out",
    "rate_in_per_1k",
    "rate_out_per_1k",
    "expected_in",
    "lift",
    "p_adjusted",
    "affected",
    "pooled",
)


def _finding(row: dict, host_tests: list[dict], cleared: list[dict]) -> Finding:
    """The finding of one reported job, with the numbers that decided it and the jobs whose OOMs it explains."""
    hosts = ", ".join(row["hosts_affected"])
    windows = ", ".join(row["windows_utc"])
    metrics = {**{k: row[k] for k in _METRICS}, "host_tests": host_tests}
    if row["explained_oom_minutes_in"] or cleared:
        metrics["overlap"] = {
            **{k: row[k] for k in _OVERLAP},
            "explains_jobs": [{k: other[k] for k in ("name", *_OVERLAP, *_RETEST)} for other in cleared],
        }
    return Finding(
        kind="scheduled_job",
        subject=f"job {row['name']}",
        evidence=_evidence(row) + _overlap_evidence(row, cleared),
        advice=f"Move {row['name']} out of its window {windows} UTC or off hosts {hosts}.",
        confidence=_confidence(row),
        impact=round(row["excess_ooms"], 1),
        window=Window(row["first_start"], row["last_end"], row["schedule"]),
        metrics=metrics,
    )


# What a finding's metrics["overlap"] shows of the job's minutes set aside (present only when there are some,
# or when the job explains another job's OOM minutes: `explains_jobs`, each with its test without them).
_OVERLAP = (
    "causal_rank",
    "oom_minutes_in",
    "explained_oom_minutes_in",
    "explained_ooms_in",
    "explained_by_jobs",
    "explained_by_neighbours",
)
_RETEST = ("verdict", "minutes_in", "ooms_in", "expected_in", "lift", "p_value")


def _overlap_evidence(row: dict, cleared: list[dict]) -> str:
    """What was set aside of its own OOM minutes, and the other jobs whose OOM minutes it explains."""
    text = ""
    if row["explained_oom_minutes_in"]:
        sentence = overlap_sentence(row)
        text += f" {sentence[0].upper()}{sentence[1:]}."
    if cleared:
        text += (
            f" {row['name']} also explains OOMs that fell in other jobs' windows: "
            + "; ".join(f"{other['name']}: {overlap_sentence(other)}" for other in cleared)
            + "."
        )
    return text


def overlap_sentence(row: dict) -> str:
    """'3 of its 4 OOM minutes overlap backup-nightly, already found causal; over its other 17.0 run-hours: 1 OOM
    against 0.9 expected (lift 1.1x, p = 0.6)' for a `job_effects` row with minutes set aside."""
    causes = []
    if row["explained_by_jobs"]:
        causes.append(f"{', '.join(row['explained_by_jobs'])}, already found causal")
    if row["explained_by_neighbours"]:
        causes.append(f"{_neighbours(row['explained_by_neighbours'])}, whose memory on the card explains them")
    ooms = row["ooms_in"]
    return (
        f"{row['explained_oom_minutes_in']} of its {row['oom_minutes_in']} OOM minutes overlap "
        f"{' and '.join(causes)}; over its other {row['minutes_in'] / 60:.1f} run-hours: {ooms} "
        f"OOM{'' if ooms == 1 else 's'} against {row['expected_in']:.1f} expected (lift {format_lift(row['lift'])}, "
        f"p {format_p(row['p_value'])})"
    )


_METRICS = (
    "name",
    "schedule",
    "windows_utc",
    "runs",
    "selectors",
    "hosts_matched",
    "unmatched_selectors",
    "hosts",
    "hosts_without_traffic",
    "hosts_affected",
    "pooled",
    "hosts_not_affected",
    "ooms_in",
    "intrinsic_in",
    "expected_in",
    "lift",
    "p_value",
    "rate_in_per_1k",
    "rate_out_per_1k",
    "excess_ooms",
    "control_hosts",
    "control_lift",
    "control_p_value",
)


def _evidence(row: dict) -> str:
    """One paragraph: where it runs, the pooled numbers, the unaffected hosts, the control."""
    text = (
        f"{row['name']} runs {row['schedule']} on {', '.join(row['hosts'])}{_selected(row)}. Inside its windows "
        f"{row['ooms_in']} OOMs against {row['expected_in']:.1f} expected from traffic"
        f" (lift {format_lift(row['lift'])}, p {format_p(row['p_value'])}),"
        f" {row['excess_ooms']:.0f} of them excess."
        f" Inside against outside: {'; '.join(row['affected_detail'])}."
    )
    if row["pooled"]:
        text += (
            f" No host alone had {MIN_OOMS_INSIDE} OOMs inside; the job is found from its hosts tested together: "
            f"it acts a little on each."
        )
    if row["intrinsic_in"]:
        text += (
            f" {row['intrinsic_in']} more OOMs inside are left out: requests too large for the card on any "
            f"baseline, or memory cached in pieces, fail whatever runs beside them."
        )
    if row["hosts_not_affected"]:
        others = row["hosts_not_affected"]
        verb = "runs" if len(others) == 1 else "run"
        text += f" {', '.join(others)} {verb} it too without a significant excess."
    if row["control_hosts"]:
        text += (
            f" Hosts that do not run it, at the same times: lift {format_lift(row['control_lift'])}, "
            f"p {format_p(row['control_p_value'])}."
        )
    return text + _unmatched(row)


def _selected(row: dict) -> str:
    """' (calendar hosts a10-0[1-3], infer-b-*)' when the calendar names its hosts by globs."""
    if not any(c in selector for selector in row["selectors"] for c in "*?["):
        return ""
    return f" (calendar hosts {', '.join(row['selectors'])})"


def _unmatched(row: dict) -> str:
    """What the calendar names that the data cannot test: matched hosts without traffic, selectors matching nothing."""
    text = ""
    if row["hosts_without_traffic"]:
        text += f" {', '.join(row['hosts_without_traffic'])} matched too, with no requests or OOMs to test."
    if row["unmatched_selectors"]:
        unmatched = row["unmatched_selectors"]
        text += f" Calendar host{'s' if len(unmatched) > 1 else ''} {', '.join(unmatched)} matched no instance."
    return text


def _confidence(row: dict) -> float:
    """High when the pooled test is overwhelming and the control shows nothing at the same times."""
    confidence = 0.85 if row["p_value"] < 1e-6 else 0.7
    if row["control_p_value"] is not None and row["control_p_value"] >= 0.05:
        confidence += 0.1
    return round(confidence, 2)


def _neighbours(labels: list[str]) -> str:
    """'neighbour processes 7001, 7003' for the labels of jobs.neighbour_ooms ('neighbour process 7001', ...)."""
    single = "neighbour process "
    if len(labels) < 2 or not all(label.startswith(single) for label in labels):
        return ", ".join(labels)
    return "neighbour processes " + ", ".join(label.removeprefix(single) for label in labels)
