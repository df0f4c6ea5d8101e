"""scheduled_job findings: jobs whose windows raise the OOM rate on their hosts, with the numbers that decided it."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from ..analyses.fleet.jobs import host_effects, job_effects
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
        _finding(row, own.filter(pl.col("name") == row["name"]).drop("name").to_dicts())
        for row in effects.filter(pl.col("verdict") == "reported").to_dicts()
    ]


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
)


def _finding(row: dict, host_tests: list[dict]) -> Finding:
    """The finding of one reported job, with the numbers that decided it."""
    hosts = ", ".join(row["hosts_affected"])
    windows = ", ".join(row["windows_utc"])
    return Finding(
        kind="scheduled_job",
        subject=f"job {row['name']}",
        evidence=_evidence(row),
        advice=f"Move {row['name']} out of its window {windows} UTC or off hosts {hosts}.",
        confidence=_confidence(row),
        impact=round(row["excess_ooms"], 1),
        window=Window(row["first_start"], row["last_end"], row["schedule"]),
        metrics={**{k: row[k] for k in _METRICS}, "host_tests": host_tests},
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
