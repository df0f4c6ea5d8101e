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

Each job is tested on what nothing else explains (`attribution`). Minutes when a job already found causal runs
on the same instance, and minutes of OOMs a neighbour process explains (classified `external_pressure`: the
neighbour named in the message or listed by nvidia-smi) unless the job is what brings that neighbour there,
count on neither side of another job's test. A job may bring a neighbour only if telemetry first listed the
neighbour during one of the job's runs (`fct_gpu_process_stays`): a process on the card before a run started
is not that run's, however many of its OOMs fall in the run. Which jobs are causal is searched in a fixed
order, not the calendar's: the job with the highest lift where it acts is taken first, the rest are tested
again without its minutes, and so on; a causal job that no longer holds once the later ones' minutes are set
aside is dropped.
So a harmless weekly job whose window covers one run of a nightly job that brings a 48 GiB process is not
blamed for that night's OOMs, and the result is the same whatever the order of the calendar's rows.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

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
# batches) a burst that happens to fall in a job's hours would otherwise be blamed on the job. So is a message
# whose card's accounting shows no memory but the process's own ('own_memory'): nothing beside it held any; and a
# request no smaller than one of its version that failed alone on the same cards ('tokens_failed_alone').
INTRINSIC_RULES = ("capacity", "fragmentation", "leak_alone", "leak_dominates", "own_memory", "tokens_failed_alone")
# A neighbour process counts as a job's (the job may be what starts it, so its OOMs stay in the job's test)
# when at least this share of the OOMs it explains on an instance fall inside the job's windows there: a process
# a job starts lives inside the job's runs, a few OOMs just outside them (a run that overran, clocks apart)
# aside. The share findings.causes.JOB_SHARE uses to name a job as a neighbour's, so both tell one story.
NEIGHBOUR_SHARE = 0.8
# Half an OOM added to every count when ranking jobs by lift (Haldane's correction): a job with no OOM outside
# its windows has no finite lift, and the correction ranks it, like any other, by how concentrated its OOMs are.
HALDANE = 0.5

# The runs that fall in the time the job's hosts have data (cron rules are expanded with a day of margin).


@dataclass(frozen=True)
class Schedule:
    """When a job runs, as people say it."""

    text: str  # "daily 01:00-02:30 UTC"
    windows: tuple[str, ...]  # ("01:00-02:30",)
    runs: int
    first_start: datetime | None
    last_end: datetime | None


@dataclass(frozen=True)
class Attribution:
    """What the search for causal jobs ended on: the jobs found causal, and every job tested without the minutes
    the others explain."""

    causal: tuple[str, ...]  # in the order they were found
    hosts: pl.DataFrame  # host_effects' rows
    jobs: pl.DataFrame  # job_effects' rows


@dataclass(frozen=True)
class _Given:
    """What the search does not change: OOMs the process explains by itself, OOMs a neighbour explains, and
    the jobs that may bring each neighbour (one row per OOM; the last: per job, instance and neighbour)."""

    intrinsic: pl.DataFrame  # instance, minute
    neighbours: pl.DataFrame  # instance, minute, label
    owners: pl.DataFrame  # name, instance, label


@shared()
def attribution(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> Attribution:
    """Find the causal jobs, each tested without the minutes the others explain (see the module's docstring).

    One step at a time: a causal job that is no longer reported once the other causal jobs' minutes are set
    aside is dropped (the weakest first), else the strongest job reported without the causal jobs' minutes is
    taken (`_rank`); it ends when neither happens. A dropped job is not taken again, so it ends within two
    steps per job.
    """
    given = _given(con, since, until)
    plans, matched = schedules(con, since, until), job_hosts(con)
    causal: list[str] = []
    dropped: set[str] = set()
    while True:
        hosts = _host_rows(con, given, causal, since, until)
        effects = _effects(hosts, plans, matched)
        if not _revise(effects, hosts, causal, dropped):
            return Attribution(tuple(causal), hosts, _settled(effects, causal))


@shared()
def host_effects(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """One row per job x instance: OOMs and traffic inside and outside the job's windows, and the test, over the
    minutes nothing else explains (`attribution`).

    Columns: `name`, `instance`, `on_job_host` (false: a control instance, compared over the job's windows
    elsewhere), `traffic_source` ('requests' or 'fleet_profile'), `requests_in`, `requests_out`, `ooms_in`,
    `ooms_out` (OOMs the job could have caused), `intrinsic_in`, `intrinsic_out` (OOMs the process explains
    by itself, left out of those), `exposure_in`, `exposure_out` (requests, or the fleet profile), `rate_in_per_1k`,
    `rate_out_per_1k` (null without counted requests), `expected_in` (OOMs inside if they followed traffic),
    `lift` (rate inside / rate outside; null when outside has no OOM or no traffic), `p_value` (exact, one
    sided), `p_adjusted` (Holm over the job-host rows; null for controls), `affected`, `pooled` (affected only as
    one of a job's many hosts tested together, `_pool_thin_jobs`); and inside the windows,
    `minutes_in` (minutes with traffic that were tested), `explained_minutes_in` (set aside: a causal job or a
    neighbour explains them), `oom_minutes_in` (minutes with an OOM the job could have caused),
    `explained_oom_minutes_in` (those set aside), `explained_ooms_in` (their OOMs), `explained_by_jobs` (the
    causal jobs that explain them), `explained_by_neighbours` (the neighbours, where no causal job does).
    """
    return attribution(con, since, until).hosts


def neighbour_ooms(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """One row per OOM a neighbour process explains (classified `external_pressure`: the neighbour named in the
    message or listed by nvidia-smi held what the request needed): `instance`, `minute`, `label` ("neighbour
    process 4242", the neighbours named; one label per neighbour on an instance, a new pid a new one),
    `first_seen` (when telemetry first listed the one that arrived last, `neighbour_first_seen`)."""
    return _neighbour_rows(con, classify_ooms(con, since, until))


def _neighbour_rows(con: duckdb.DuckDBPyConnection, classified: pl.DataFrame) -> pl.DataFrame:
    """`neighbour_ooms` from the classified OOMs."""
    events = neighbour_first_seen(con, _timed(classified).filter(pl.col("cause") == "external_pressure"))
    pids = pl.col("other_pids").list.sort().cast(pl.List(pl.Utf8)).list.join(", ")
    count = pl.col("other_pids").list.len().fill_null(0)
    label = (
        pl.when(count == 0)
        .then(pl.lit("an unnamed neighbour process"))
        .when(count == 1)
        .then(pl.lit("neighbour process ") + pids)
        .otherwise(pl.lit("neighbour processes ") + pids)
    )
    return events.select("instance", pl.col("ts").dt.truncate("1m").alias("minute"), label.alias("label"), "first_seen")


def neighbour_first_seen(con: duckdb.DuckDBPyConnection, events: pl.DataFrame) -> pl.DataFrame:
    """`events` (instance, ts, other_pids) with `first_seen`: when telemetry first listed the neighbour that
    arrived last, in the stay of it that holds the OOM (q_neighbour_first_seen; null where no telemetry lists
    any). A process that existed before a job's run started is not that run's doing."""
    if events.is_empty():
        return events.with_columns(pl.lit(None, pl.Datetime("us")).alias("first_seen"))
    params = {
        "instances": events["instance"].to_list(),
        "ts": events["ts"].to_list(),
        "pids": events["other_pids"].to_list(),
    }
    seen = con.sql(sql_text("q_neighbour_first_seen"), params=params).pl()
    return events.with_columns(seen["first_seen"].cast(pl.Datetime("us")).alias("first_seen"))


def _timed(events: pl.DataFrame) -> pl.DataFrame:
    """Classified OOMs the minute counts hold: placed on an instance and in time, not a snapshot's record."""
    return events.filter(
        (pl.col("origin") != "snapshot") & pl.col("ts").is_not_null() & pl.col("instance").is_not_null()
    )


def _given(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None) -> _Given:
    """The process's own OOMs, the neighbours' OOMs and the jobs that may bring each neighbour."""
    classified = classify_ooms(con, since, until)
    own = _timed(classified).filter(pl.col("rule").is_in(INTRINSIC_RULES))
    intrinsic = own.select("instance", pl.col("ts").dt.truncate("1m").alias("minute"))
    neighbours = _neighbour_rows(con, classified)
    return _Given(intrinsic, neighbours, _owners(con, neighbours))


def _owners(con: duckdb.DuckDBPyConnection, neighbours: pl.DataFrame) -> pl.DataFrame:
    """(job, instance, neighbour) where at least NEIGHBOUR_SHARE of the neighbour's OOMs there fall in the job's
    windows: the job may be what brings it."""
    if neighbours.is_empty():
        return pl.DataFrame(schema={"name": pl.Utf8, "instance": pl.Utf8, "label": pl.Utf8})
    params = {
        "instances": neighbours["instance"].to_list(),
        "minutes": neighbours["minute"].to_list(),
        "labels": neighbours["label"].to_list(),
        "first_seen": neighbours["first_seen"].to_list(),
    }
    shares = con.sql(sql_text("q_job_neighbour_owners"), params=params).pl()
    owned = shares.filter(pl.col("ooms_inside") >= NEIGHBOUR_SHARE * pl.col("ooms")).select("name", "instance", "label")
    return _likeliest_owners(owned)


def _likeliest_owners(owned: pl.DataFrame) -> pl.DataFrame:
    """Of the jobs whose windows all hold one neighbour (their runs overlapped where it ran), the ones that also
    bring neighbours no other job's windows hold: a job only ever seen beside another has no evidence of its own
    (fleet 71721 of `bench/truth.py --seed 71700`: a decoy's one run inside a nightly backup's). Jobs with as much
    evidence of their own each keep it; the order of the calendar's rows changes nothing."""
    claims = owned.group_by("instance", "label").agg(pl.len().alias("claims"))
    alone = (
        owned.join(claims, on=["instance", "label"])
        .filter(pl.col("claims") == 1)
        .group_by("name")
        .agg(pl.len().alias("alone"))
    )
    ranked = owned.join(alone, on="name", how="left").with_columns(pl.col("alone").fill_null(0))
    best = ranked.group_by("instance", "label").agg(pl.col("alone").max().alias("best"))
    return (
        ranked.join(best, on=["instance", "label"])
        .filter(pl.col("alone") == pl.col("best"))
        .select("name", "instance", "label")
    )


def _host_rows(
    con: duckdb.DuckDBPyConnection,
    given: _Given,
    causal: Sequence[str],
    since: datetime | None,
    until: datetime | None,
) -> pl.DataFrame:
    """host_effects' rows with the minutes of `causal` jobs (each on the hosts it runs on, for every other job)
    and of neighbours not the job's own set aside."""
    params = {
        "since": utc_naive(since),
        "until": utc_naive(until),
        "causal": list(causal),
        "neighbour_instances": given.neighbours["instance"].to_list(),
        "neighbour_minutes": given.neighbours["minute"].to_list(),
        "neighbour_labels": given.neighbours["label"].to_list(),
        "owner_names": given.owners["name"].to_list(),
        "owner_instances": given.owners["instance"].to_list(),
        "owner_labels": given.owners["label"].to_list(),
        "intrinsic_instances": given.intrinsic["instance"].to_list(),
        "intrinsic_minutes": given.intrinsic["minute"].to_list(),
    }
    rows = con.sql(sql_text("q_job_host_counts"), params=params).pl().to_dicts()
    for row in rows:
        row["ooms_in"] -= row["intrinsic_in"]
        row["ooms_out"] -= row["intrinsic_out"]
        _test_host(row)
    tested = [r for r in rows if r["on_job_host"]]
    for row, adjusted in zip(tested, holm([r["p_value"] for r in tested]), strict=True):
        row["p_adjusted"] = adjusted
        row["affected"] = _is_affected(row)
        row["pooled"] = False
    _pool_thin_jobs(tested)
    for row in rows:
        row.setdefault("p_adjusted", None)
        row.setdefault("affected", False)
        row.setdefault("pooled", False)
    return pl.DataFrame(rows, schema=_HOST_SCHEMA)


def _pool_thin_jobs(tested: list[dict]) -> None:
    """Mark, in place, the hosts of a job that acts on many hosts a little each (`pooled`, `affected`).

    A job whose process lands on every host it runs on, once or twice a week each, leaves each host fewer than
    MIN_OOMS_INSIDE OOMs in its windows: no host alone is worth a person's time, yet together they are the
    fleet-wide pattern a weekly review is for (fleet 105520 of `bench/truth.py --classic --seed 105520`: 3, 2
    and 3 OOMs inside on three A10s, none outside, 0.29 expected). Such a job is tested once over its hosts
    (pooled_excess_p, Holm over the jobs so tested) with the host test's own bars; where it holds, its hosts
    whose OOMs inside exceed their own expectation at the host test's lift count as affected."""
    by_job: dict[str, list[dict]] = defaultdict(list)
    for row in tested:
        by_job[row["name"]].append(row)
    thin = [rows for rows in by_job.values() if not any(r["affected"] for r in rows)]
    strata = [[_stratum(r) for r in rows] for rows in thin]
    adjusted = holm([pooled_excess_p(s) for s in strata])
    for rows, job_strata, p_adjusted in zip(thin, strata, adjusted, strict=True):
        inside = sum(r["ooms_in"] for r in rows)
        if not _passes(p_adjusted, pooled_rate_ratio(job_strata), inside):
            continue
        for row in rows:
            if row["exposure_in"] > 0 and row["ooms_in"] > row["expected_in"] and _lift_ok(row["lift"]):
                row["affected"] = row["pooled"] = True


def _revise(effects: pl.DataFrame, hosts: pl.DataFrame, causal: list[str], dropped: set[str]) -> bool:
    """One step of the search, in place: drop the weakest causal job no longer reported, else take the strongest
    reported job not causal (and never dropped); False when there is nothing to do."""
    rows = {row["name"]: row for row in effects.to_dicts()}
    failing = [name for name in causal if rows[name]["verdict"] != "reported"]
    if failing:
        weakest = max(failing, key=lambda name: _rank(rows[name], hosts))
        causal.remove(weakest)
        dropped.add(weakest)
        return True
    seen = {*causal, *dropped}
    found = [name for name, row in rows.items() if row["verdict"] == "reported" and name not in seen]
    if not found:
        return False
    causal.append(min(found, key=lambda name: _rank(rows[name], hosts)))
    return True


def _rank(row: dict, hosts: pl.DataFrame) -> tuple[float, float, str]:
    """Strongest first: the highest lift where the job acts (its affected hosts, HALDANE-corrected), then the
    most excess OOMs, then the name, so that ties do not depend on the order of the calendar's rows."""
    affected = hosts.filter((pl.col("name") == row["name"]) & pl.col("affected")).to_dicts()
    return (-_corrected_lift(affected), -row["excess_ooms"], row["name"])


def _corrected_lift(rows: list[dict]) -> float:
    """Mantel-Haenszel rate ratio over host rows with HALDANE added to each count (0 without exposure)."""
    numerator = denominator = 0.0
    for row in rows:
        total = row["exposure_in"] + row["exposure_out"]
        if row["exposure_in"] <= 0 or row["exposure_out"] <= 0:
            continue
        numerator += (row["ooms_in"] + HALDANE) * row["exposure_out"] / total
        denominator += (row["ooms_out"] + HALDANE) * row["exposure_in"] / total
    return numerator / denominator if denominator > 0 else 0.0


def _settled(effects: pl.DataFrame, causal: list[str]) -> pl.DataFrame:
    """The jobs' rows with `causal_rank` (1 for the first found); a job dropped from the causal ones that would
    be reported without their minutes is not: they explain it ('explained by other causes')."""
    rank = {name: i + 1 for i, name in enumerate(causal)}
    verdict = pl.col("verdict")
    cleared = (verdict == "reported") & ~pl.col("name").is_in(causal)
    return effects.with_columns(
        pl.when(cleared).then(pl.lit("explained by other causes")).otherwise(verdict).alias("verdict"),
        pl.col("name").replace_strict(rank, default=None, return_dtype=pl.Int64).alias("causal_rank"),
    )


# What each job test set aside as explained by another cause (a causal job, a neighbour), and what was left.
_OVERLAP_COLUMNS: dict[str, pl.DataType] = {
    "minutes_in": pl.Int64,
    "explained_minutes_in": pl.Int64,
    "oom_minutes_in": pl.Int64,
    "explained_oom_minutes_in": pl.Int64,
    "explained_ooms_in": pl.Int64,
    "explained_by_jobs": pl.List(pl.Utf8),
    "explained_by_neighbours": pl.List(pl.Utf8),
}
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
    "pooled": pl.Boolean,
    **_OVERLAP_COLUMNS,
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
    return _passes(row["p_adjusted"], row["lift"], row["ooms_in"])


def _passes(p_adjusted: float, lift: float | None, ooms_in: int) -> bool:
    """The bars a job's OOMs inside must clear, on one host or over its hosts together (`_pool_thin_jobs`)."""
    return p_adjusted < ALPHA and _lift_ok(lift) and ooms_in >= MIN_OOMS_INSIDE


def _lift_ok(lift: float | None) -> bool:
    """A lift worth acting on; None (no OOM outside) is one beyond any."""
    return lift is None or lift >= MIN_LIFT


@shared()
def schedules(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> dict[str, Schedule]:
    """Each job's runs within the data, described ("daily 01:00-02:30 UTC", "weekly on Saturday ..."); a job whose
    rules are all written in one zone (a crontab's CRON_TZ=, a CronJob's timeZone) is described in it, as its
    owner wrote it: across a change of daylight saving time its runs keep their local hour, not their UTC one."""
    params = {"since": utc_naive(since), "until": utc_naive(until)}
    runs: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for name, start, end in con.sql(sql_text("q_job_runs"), params=params).fetchall():
        runs[name].append((start, end))
    zones = {name: zones for name, zones in con.sql(sql_text("q_job_zones")).fetchall()}
    return {
        name: describe_schedule(spans, zones[name][0] if len(zones.get(name) or ()) == 1 else "UTC")
        for name, spans in runs.items()
    }


def describe_schedule(runs: list[tuple[datetime, datetime]], zone: str = "UTC") -> Schedule:
    """Group runs by time of day in `zone` and name their cadence from the gaps between starts. `windows` stay in
    UTC, as the runs are stored."""
    text = _schedule_text(_in_zone(runs, zone), zone)
    windows = tuple(sorted({f"{start:%H:%M}-{end:%H:%M}" for start, end in runs}))
    first = min((s for s, _ in runs), default=None)
    last = max((e for _, e in runs), default=None)
    return Schedule(text, windows, len(runs), first, last)


def _in_zone(runs: list[tuple[datetime, datetime]], zone: str) -> list[tuple[datetime, datetime]]:
    """Naive UTC runs as the wall clock of `zone` reads them."""
    if zone == "UTC":
        return runs
    local = ZoneInfo(zone)

    def wall(moment: datetime) -> datetime:
        return moment.replace(tzinfo=UTC).astimezone(local).replace(tzinfo=None)

    return [(wall(start), wall(end)) for start, end in runs]


def _schedule_text(runs: list[tuple[datetime, datetime]], zone: str) -> str:
    by_window: dict[str, list[datetime]] = defaultdict(list)
    for start, end in runs:
        by_window[f"{start:%H:%M}-{end:%H:%M}"].append(start)
    windows = sorted(by_window)
    cadences = {window: _cadence(sorted(starts)) for window, starts in by_window.items()}
    if len(set(cadences.values())) == 1:
        return f"{next(iter(cadences.values()))} {', '.join(windows)} {zone}"
    return "; ".join(f"{cadences[w]} {w} {zone}" for w in windows)


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
    `pooled` (its hosts are affected only tested together: each alone had too few OOMs inside),
    `lift` (Mantel-Haenszel rate ratio over its hosts), `p_value` (pooled over its hosts), `excess_ooms`
    (on affected hosts: OOMs inside minus what their outside rate predicts), `control_hosts`,
    `control_lift`, `control_p_value`, `rate_in_per_1k` / `rate_out_per_1k` (affected hosts with a request
    log, pooled), `affected_detail` (per affected host: its rates, lift and adjusted p), `verdict`
    ('reported', 'no OOMs inside', 'not significant', 'control also elevated', 'no host matched': no
    selector matches an instance, 'no traffic on its hosts', 'explained by other causes': reported only with
    the minutes of jobs found causal after it). A job without tested hosts has no control either (see
    fct_job_windows). Every count is over the minutes nothing else explains (`attribution`); what was set aside
    inside its windows, summed over its hosts: `minutes_in` (minutes tested), `explained_minutes_in`,
    `oom_minutes_in`, `explained_oom_minutes_in`, `explained_ooms_in`, `explained_by_jobs` (causal jobs),
    `explained_by_neighbours` (neighbour processes); `causal_rank` (1 for the first job found causal, null for
    a job not found causal).
    """
    return attribution(con, since, until).jobs


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
    "pooled": pl.Boolean,
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
    **_OVERLAP_COLUMNS,
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
        "pooled": bool(affected["pooled"].any()),
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
        **_set_aside(own),
    }
    row["verdict"] = _verdict(row)
    return row


_SET_ASIDE_COUNTS = (
    "minutes_in",
    "explained_minutes_in",
    "oom_minutes_in",
    "explained_oom_minutes_in",
    "explained_ooms_in",
)
_EXPLAINERS = ("explained_by_jobs", "explained_by_neighbours")


def _set_aside(own: pl.DataFrame) -> dict:
    """What was tested and what was set aside inside the windows, summed over the job's hosts."""
    counts = {column: int(own[column].sum()) for column in _SET_ASIDE_COUNTS}
    names = {column: sorted({n for names in own[column] for n in names}) for column in _EXPLAINERS}
    return counts | names


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
