"""Scheduled jobs as OOM causes: the OOM rate inside each job's windows against outside, per host.

A job runs on the instances its calendar's host selectors (exact names or globs, `fct_job_hosts`) match.
For every job of `job_occurrences` and every instance it runs on, OOMs inside its windows are compared with
OOMs outside, normalised by the instance's own traffic (`fct_job_minutes`): an exact two-rate test (Holm
over all job x host pairs), the lift (rate inside / rate outside) and the excess OOMs. Instances the job
does not run on, over the same windows, are the control: if they show the same excess, the time of day is
to blame, not the job. OOMs the serving process explains by itself (INTRINSIC_RULES of classify.py) are
left out of both counts: they fail whatever runs beside them. Instances known only from text logs are
compared against the fleet's traffic profile (`fct_traffic_exposure`); their rates per 1,000 requests are
left null. A job whose selectors match no instance with traffic is not tested and has no control: every
other host might be the one it meant.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise

import duckdb
import polars as pl

from ...load.sql import sql_text
from ..shared import shared
from ..window import utc_naive
from .classify import classify_ooms
from .rate_tests import (
    expected_inside,
    format_lift,
    format_p,
    holm,
    poisson_excess_p,
    pooled_excess_p,
    pooled_rate_ratio,
    rate_ratio,
    rate_ratio_p,
)

# A host is affected when its Holm-adjusted p is below ALPHA, the rate inside is at least MIN_LIFT times
# the rate outside, and at least MIN_OOMS_INSIDE OOMs fell inside: a handful of OOMs in a short window
# can be improbable without being worth a person's time.
ALPHA = 0.01
MIN_LIFT = 2.0
MIN_OOMS_INSIDE = 5
# OOMs that fail whatever else runs on the card (classify_rules.py): a request that needs more than the card
# ever served even on a fresh baseline ('capacity'), one that the process's own cache covered twice over in
# pieces ('fragmentation'), one that a leak's baseline alone pushed over the edge ('leak_alone': a neighbour,
# if any, would not have; 'leak_dominates': leaked bytes fill most of the limit). None can be a job's doing,
# and since they come in bursts (a leak fails request after request until the restart; large prompts come in
# batches) a burst that happens to fall in a job's hours would otherwise be blamed on the job.
INTRINSIC_RULES = ("capacity", "fragmentation", "leak_alone", "leak_dominates")

# The runs that fall in the time the job's hosts have data (cron rules are expanded with a day of margin).


@dataclass(frozen=True)
class Schedule:
    """When a job runs, as people say it."""

    text: str  # "daily 01:00-02:30 UTC"
    windows: tuple[str, ...]  # ("01:00-02:30",)
    runs: int
    first_start: datetime | None
    last_end: datetime | None


@shared()
def host_effects(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """One row per job x instance: OOMs and traffic inside and outside the job's windows, and the test.

    Columns: `name`, `instance`, `on_job_host` (false: a control instance, compared over the job's windows
    elsewhere), `traffic_source` ('requests' or 'fleet_profile'), `requests_in`, `requests_out`, `ooms_in`,
    `ooms_out` (OOMs the job could have caused), `intrinsic_in`, `intrinsic_out` (OOMs the process explains
    by itself, left out of those), `exposure_in`, `exposure_out` (requests, or the fleet profile), `rate_in_per_1k`,
    `rate_out_per_1k` (null without counted requests), `expected_in` (OOMs inside if they followed traffic),
    `lift` (rate inside / rate outside; null when outside has no OOM or no traffic), `p_value` (exact, one
    sided), `p_adjusted` (Holm over the job-host rows; null for controls), `affected`.
    """
    params = {"since": utc_naive(since), "until": utc_naive(until)}
    rows = con.sql(sql_text("q_job_host_counts"), params=params).pl().to_dicts()
    intrinsic = _intrinsic_counts(con, since, until)
    for row in rows:
        row["intrinsic_in"], row["intrinsic_out"] = intrinsic.get((row["name"], row["instance"]), (0, 0))
        row["ooms_in"] -= row["intrinsic_in"]
        row["ooms_out"] -= row["intrinsic_out"]
        _test_host(row)
    tested = [r for r in rows if r["on_job_host"]]
    for row, adjusted in zip(tested, holm([r["p_value"] for r in tested]), strict=True):
        row["p_adjusted"] = adjusted
        row["affected"] = _is_affected(row)
    for row in rows:
        row.setdefault("p_adjusted", None)
        row.setdefault("affected", False)
    return pl.DataFrame(rows, schema=_HOST_SCHEMA)


def _intrinsic_counts(
    con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None
) -> dict[tuple[str, str], tuple[int, int]]:
    """(job, instance) -> OOMs of INTRINSIC_RULES inside and outside the job's windows, over the minutes
    fct_job_minutes counts (so that they can be taken from its OOM counts)."""
    events = classify_ooms(con, since, until)
    mine = events.filter(
        pl.col("rule").is_in(INTRINSIC_RULES) & (pl.col("origin") != "snapshot") & pl.col("ts").is_not_null()
    )
    if mine.is_empty():
        return {}
    params = {
        "instances": mine["instance"].to_list(),
        "minutes": mine["ts"].dt.truncate("1m").to_list(),
        "since": utc_naive(since),
        "until": utc_naive(until),
    }
    found = con.sql(sql_text("q_job_intrinsic_ooms"), params=params).fetchall()
    return {(name, instance): (inside, outside) for name, instance, inside, outside in found}


_HOST_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.Utf8,
    "instance": pl.Utf8,
    "on_job_host": pl.Boolean,
    "traffic_source": pl.Utf8,
    "requests_in": pl.Int64,
    "requests_out": pl.Int64,
    "ooms_in": pl.Int64,
    "ooms_out": pl.Int64,
    "intrinsic_in": pl.Int64,
    "intrinsic_out": pl.Int64,
    "exposure_in": pl.Float64,
    "exposure_out": pl.Float64,
    "rate_in_per_1k": pl.Float64,
    "rate_out_per_1k": pl.Float64,
    "expected_in": pl.Float64,
    "lift": pl.Float64,
    "p_value": pl.Float64,
    "p_adjusted": pl.Float64,
    "affected": pl.Boolean,
}


def _test_host(row: dict) -> None:
    """Add rates, expectation, lift and p-value to one job x instance row."""
    counted = row["traffic_source"] == "requests"
    row["rate_in_per_1k"] = _per_1k(row["ooms_in"], row["requests_in"]) if counted else None
    row["rate_out_per_1k"] = _per_1k(row["ooms_out"], row["requests_out"]) if counted else None
    stratum = _stratum(row)
    row["expected_in"] = expected_inside([stratum])
    row["lift"] = rate_ratio(*stratum)
    row["p_value"] = rate_ratio_p(*stratum)


def _per_1k(ooms: int, requests: int) -> float | None:
    return 1000.0 * ooms / requests if requests else None


def _stratum(row: dict) -> tuple[int, float, int, float]:
    return row["ooms_in"], row["exposure_in"], row["ooms_out"], row["exposure_out"]


def _is_affected(row: dict) -> bool:
    """Significant after correction, with a lift worth acting on (no OOM outside counts as unbounded)."""
    lift_ok = row["lift"] is None or row["lift"] >= MIN_LIFT
    return row["p_adjusted"] < ALPHA and lift_ok and row["ooms_in"] >= MIN_OOMS_INSIDE


@shared()
def schedules(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> dict[str, Schedule]:
    """Each job's runs within the data, described ("daily 01:00-02:30 UTC", "weekly on Saturday ...")."""
    params = {"since": utc_naive(since), "until": utc_naive(until)}
    runs: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for name, start, end in con.sql(sql_text("q_job_runs"), params=params).fetchall():
        runs[name].append((start, end))
    return {name: describe_schedule(spans) for name, spans in runs.items()}


def describe_schedule(runs: list[tuple[datetime, datetime]]) -> Schedule:
    """Group runs by time of day and name their cadence from the gaps between starts."""
    by_window: dict[str, list[datetime]] = defaultdict(list)
    for start, end in runs:
        by_window[f"{start:%H:%M}-{end:%H:%M}"].append(start)
    windows = tuple(sorted(by_window))
    cadences = {window: _cadence(sorted(starts)) for window, starts in by_window.items()}
    if len(set(cadences.values())) == 1:
        text = f"{next(iter(cadences.values()))} {', '.join(windows)} UTC"
    else:
        text = "; ".join(f"{cadences[w]} {w} UTC" for w in windows)
    first = min((s for s, _ in runs), default=None)
    last = max((e for _, e in runs), default=None)
    return Schedule(text, windows, len(runs), first, last)


def _cadence(starts: list[datetime]) -> str:
    """'daily', 'weekly on Saturday', 'on 2026-11-11' or 'on N days' for runs sharing a time of day."""
    gaps = Counter((b - a) for a, b in pairwise(starts))
    if not gaps:
        return f"on {starts[0]:%Y-%m-%d}"
    common = gaps.most_common(1)[0][0]
    if common == timedelta(days=1):
        return "daily"
    if common == timedelta(days=7):
        return f"weekly on {starts[0]:%A}"
    return f"on {len(starts)} days"


@shared()
def job_hosts(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """One row per job: `selectors` (its calendar hosts as written; empty: every host), `hosts_matched`
    (every instance the database knows that they match) and `unmatched_selectors` (those matching none)."""
    return con.sql(sql_text("q_job_hosts")).pl()


def job_effects(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """One row per job: its schedule, the pooled test on its hosts, the affected hosts and the control.

    Columns: `name`, `schedule`, `windows_utc` (list of "HH:MM-HH:MM"), `runs`, `first_start`, `last_end`,
    `selectors` (the calendar's host selectors as written), `hosts_matched` (every known instance they
    match), `unmatched_selectors` (selectors matching no instance), `hosts` (matched instances with traffic,
    tested), `hosts_without_traffic` (matched, nothing to test), `hosts_affected`, `hosts_not_affected`,
    `ooms_in` (OOMs the job could have caused), `intrinsic_in` (those the process explains by itself,
    left out), `expected_in`,
    `lift` (Mantel-Haenszel rate ratio over its hosts), `p_value` (pooled over its hosts), `excess_ooms`
    (on affected hosts: OOMs inside minus what their outside rate predicts), `control_hosts`,
    `control_lift`, `control_p_value`, `rate_in_per_1k` / `rate_out_per_1k` (affected hosts with a request
    log, pooled), `affected_detail` (per affected host: its rates, lift and adjusted p), `verdict`
    ('reported', 'no OOMs inside', 'not significant', 'control also elevated', 'no host matched': no
    selector matches an instance, 'no traffic on its hosts'). A job without tested hosts has no control
    either (see fct_job_windows).
    """
    return _effects(host_effects(con, since, until), schedules(con, since, until), job_hosts(con))


def _effects(hosts: pl.DataFrame, plans: dict[str, Schedule], matched: pl.DataFrame) -> pl.DataFrame:
    """`job_effects` from the host rows, the schedules and the jobs' matched hosts."""
    selectors = {row["name"]: row for row in matched.to_dicts()}
    tested = hosts["name"].unique(maintain_order=True).to_list()
    names = [*tested, *sorted(set(selectors) - set(tested))]
    rows = [
        _job_row(name, hosts.filter(pl.col("name") == name), plans.get(name), selectors.get(name, {})) for name in names
    ]
    return pl.DataFrame(rows, schema=_JOB_SCHEMA)


_JOB_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.Utf8,
    "schedule": pl.Utf8,
    "windows_utc": pl.List(pl.Utf8),
    "runs": pl.Int64,
    "first_start": pl.Datetime("us"),
    "last_end": pl.Datetime("us"),
    "selectors": pl.List(pl.Utf8),
    "hosts_matched": pl.List(pl.Utf8),
    "unmatched_selectors": pl.List(pl.Utf8),
    "hosts": pl.List(pl.Utf8),
    "hosts_without_traffic": pl.List(pl.Utf8),
    "hosts_affected": pl.List(pl.Utf8),
    "hosts_not_affected": pl.List(pl.Utf8),
    "ooms_in": pl.Int64,
    "intrinsic_in": pl.Int64,
    "expected_in": pl.Float64,
    "lift": pl.Float64,
    "p_value": pl.Float64,
    "excess_ooms": pl.Float64,
    "control_hosts": pl.List(pl.Utf8),
    "control_lift": pl.Float64,
    "control_p_value": pl.Float64,
    "rate_in_per_1k": pl.Float64,
    "rate_out_per_1k": pl.Float64,
    "affected_detail": pl.List(pl.Utf8),
    "verdict": pl.Utf8,
}


def _job_row(name: str, hosts: pl.DataFrame, plan: Schedule | None, matched: dict) -> dict:
    """Pool one job's host rows into its verdict."""
    own = hosts.filter(pl.col("on_job_host"))
    control = hosts.filter(~pl.col("on_job_host"))
    affected = own.filter(pl.col("affected"))
    strata = [_stratum(r) for r in own.to_dicts()]
    control_strata = [_stratum(r) for r in control.to_dicts()]
    row = {
        "name": name,
        "schedule": plan.text if plan else None,
        "windows_utc": list(plan.windows) if plan else [],
        "runs": plan.runs if plan else 0,
        "first_start": plan.first_start if plan else None,
        "last_end": plan.last_end if plan else None,
        "selectors": matched.get("selectors", []),
        "hosts_matched": matched.get("hosts_matched", []),
        "unmatched_selectors": matched.get("unmatched_selectors", []),
        "hosts": own["instance"].to_list(),
        "hosts_without_traffic": sorted(set(matched.get("hosts_matched", [])) - set(own["instance"])),
        "hosts_affected": affected["instance"].to_list(),
        "hosts_not_affected": own.filter(~pl.col("affected"))["instance"].to_list(),
        "ooms_in": int(own["ooms_in"].sum()),
        "intrinsic_in": int(own["intrinsic_in"].sum()),
        "expected_in": expected_inside(strata),
        "lift": pooled_rate_ratio(strata),
        "p_value": pooled_excess_p(strata),
        "excess_ooms": sum(_excess(r) for r in affected.to_dicts()),
        **_pooled_rates(affected.filter(pl.col("traffic_source") == "requests")),
        "affected_detail": [_host_detail(r) for r in affected.to_dicts()],
        "control_hosts": control["instance"].to_list(),
        "control_lift": pooled_rate_ratio(control_strata),
        "control_p_value": pooled_excess_p(control_strata) if control_strata else None,
    }
    row["verdict"] = _verdict(row)
    return row


def _pooled_rates(counted: pl.DataFrame) -> dict[str, float | None]:
    """OOMs per 1,000 requests inside and outside, summed over hosts with counted requests."""
    sums = {c: int(counted[c].sum()) for c in ("ooms_in", "requests_in", "ooms_out", "requests_out")}
    return {
        "rate_in_per_1k": _per_1k(sums["ooms_in"], sums["requests_in"]),
        "rate_out_per_1k": _per_1k(sums["ooms_out"], sums["requests_out"]),
    }


def _host_detail(row: dict) -> str:
    """'a10-01 44.2 vs 6.5 OOMs per 1,000 requests (lift 6.8x, ...)'; OOM counts for profiled hosts."""
    tail = f"lift {format_lift(row['lift'])}, adjusted p {format_p(row['p_adjusted'])}"
    if row["rate_in_per_1k"] is None:
        return (
            f"{row['instance']} {row['ooms_in']} OOMs inside against {row['expected_in']:.1f} expected "
            f"from the fleet's traffic profile ({tail})"
        )
    return (
        f"{row['instance']} {row['rate_in_per_1k']:.1f} vs {row['rate_out_per_1k'] or 0:.1f} OOMs per "
        f"1,000 requests ({tail})"
    )


def _excess(row: dict) -> float:
    """OOMs inside beyond what the host's outside rate predicts for its traffic inside."""
    if row["exposure_out"] <= 0:
        return float(row["ooms_in"])
    return row["ooms_in"] - row["exposure_in"] * row["ooms_out"] / row["exposure_out"]


def _verdict(row: dict) -> str:
    """Why a job is, or is not, reported."""
    if not row["hosts"]:
        return "no traffic on its hosts" if row["hosts_matched"] else "no host matched"
    if row["ooms_in"] == 0:
        return "no OOMs inside"
    if not row["hosts_affected"]:
        return "not significant"
    control_p, control_lift = row["control_p_value"], row["control_lift"]
    if control_p is not None and control_p < ALPHA and (control_lift or 0) >= MIN_LIFT:
        return "reported" if _beyond_control(row) else "control also elevated"
    return "reported"


def _beyond_control(row: dict) -> bool:
    """Whether the job's hosts fail far more in its windows than hosts without it fail at the same times.

    A control that is itself elevated (the fleet's traffic peak, a leak that fails at its daily high) explains
    a lift up to its own on the job's hosts too; the job is blamed only when its hosts' OOMs exceed that
    (MIN_LIFT times the control's lift, significant against the control-scaled expectation): a job whose
    process holds 10 GiB gives a lift in the hundreds against a control at 2, a decoy at the control's level.
    """
    lift, control_lift = row["lift"], row["control_lift"]
    if lift is not None and lift < MIN_LIFT * control_lift:  # None: no OOM outside, a lift beyond any
        return False
    return poisson_excess_p(row["ooms_in"], row["expected_in"] * control_lift) < ALPHA
