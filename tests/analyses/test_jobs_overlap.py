"""Attribution under overlap (issue 35): a job is tested on the minutes nothing else explains.

Tiny fleets (test_jobs.tiny_fleet: hosts h1-h3, a request a minute each for DAYS days from Monday START) with
calendars written here:

- a nightly job whose runs start a 48 GiB neighbour process (named in the OOM messages, a new pid each night)
  and a harmless weekly job whose window covers one of its runs;
- a short nightly job that fails requests, and a harmless hourly job whose windows cover its runs;
- a harmless daily job whose window overlaps the hours a neighbour process, listed by nvidia-smi and started
  by no job, holds the card;
- a nightly job that brings a neighbour process (listed by nvidia-smi) on its first night only, and a harmless
  weekly job that starts while that process already holds the card;
- each calendar with its rows shuffled.

The harmless jobs are blamed when tested on the data alone (their lift is what issue 35 saw); with the minutes a
causal job or a neighbour explains set aside, they are not, the causal job still is, and the overlap is named.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import duckdb
import polars as pl
import pytest
from test_jobs import DAYS, START, tiny_fleet

from oomlab.analyses.fleet import jobs, periodicity
from oomlab.findings import causes, periodic_window, scheduled_job
from oomlab.findings.finding import Finding

GIB = 1 << 30
# what the messages of the OOMs beside a neighbour say: a 2 GiB request, half a GiB free on an 80 GiB card, this
# process holding 28 GiB ($gib: bytes in a GiB)
SIZES = """requested_bytes = 2 * $gib::BIGINT, free_bytes = $gib::BIGINT // 2,
           total_capacity_bytes = 80 * $gib::BIGINT, process_in_use_bytes = 28 * $gib::BIGINT"""
Run = tuple[str, datetime, datetime, list[str] | None]

# every fleet: one OOM every 97 minutes on every host, whatever runs
BACKGROUND = "(i % 97 = 0)"

# 1. backup-nightly (h1, 01:00-02:30) fails every 4th minute of its runs; archive-weekly (h1, Mondays
# 00:00-04:00, twice in DAYS) is harmless, named to sort first
NIGHTLY = "backup-nightly"
WEEKLY = "archive-weekly"
NIGHTLY_OOMS = f"{BACKGROUND} OR (host = 'h1' AND m >= 60 AND m < 150 AND m % 4 = 0)"

# 2. reindex-nightly (h1, 02:00-02:20) fails every 2nd minute of its runs; agent-hourly (h1, h2, :00-:20 of
# every hour) is harmless
REINDEX = "reindex-nightly"
HOURLY = "agent-hourly"
REINDEX_OOMS = f"{BACKGROUND} OR (host = 'h1' AND m >= 120 AND m < 140 AND m % 2 = 0)"

# 3. a neighbour process on h2, 11:00-14:00 on days 1, 3, 5 and 7 (a new pid each day), fails every 3rd
# minute; daily-export (h2, 12:00-13:00) is harmless. And on h3 a neighbour every day 20:00-21:00, no job.
EXPORT = "daily-export"
NEIGHBOUR_DAYS = (1, 3, 5, 7)
NEIGHBOUR_H2 = f"host = 'h2' AND m >= 660 AND m < 840 AND list_contains({list(NEIGHBOUR_DAYS)}, d)"
NEIGHBOUR_H3 = "host = 'h3' AND m >= 1200 AND m < 1260"
NEIGHBOUR_OOMS = f"{BACKGROUND} OR ({NEIGHBOUR_H2} AND m % 3 = 0) OR ({NEIGHBOUR_H3} AND m % 5 = 0)"

# 4. fleet 102222 of `bench/truth.py --seed 102200`: backup-nightly (h2, 01:00-02:30) brings a neighbour process on
# its first night only (nvidia-smi lists it 01:00-02:28), which fails every 3rd minute of 01:45-02:28;
# archive-weekly (h2, Mondays 01:45-02:40) is harmless: the process was on the card 45 minutes before it started.
# Every neighbour OOM falls in both jobs' runs, and the weekly one's short windows give it the higher lift.
ARRIVAL_H2 = "host = 'h2' AND d = 0 AND m >= 60 AND m < 149"
ARRIVAL_OOMS = f"{BACKGROUND} OR ({ARRIVAL_H2} AND m >= 105 AND m % 3 = 0)"


def _daily(name: str, start: int, end: int, hosts: list[str]) -> list[Run]:
    """A run a day from minute `start` to `end` of the day."""
    days = [START + timedelta(days=d) for d in range(DAYS)]
    return [(name, day + timedelta(minutes=start), day + timedelta(minutes=end), hosts) for day in days]


def _fleet(oom_rule: str, runs: list[Run], shuffle: int | None) -> duckdb.DuckDBPyConnection:
    """tiny_fleet with these runs, inserted in the order given or shuffled with seed `shuffle`."""
    con = tiny_fleet(oom_rule, [])
    rows = list(runs)
    if shuffle is not None:
        random.Random(shuffle).shuffle(rows)
    for name, start, end, hosts in rows:
        con.execute("INSERT INTO job_occurrences VALUES (2, 1, ?, ?, ?, ?, 'calendar')", [name, start, end, hosts])
    return con


def nightly_and_weekly(shuffle: int | None = None) -> duckdb.DuckDBPyConnection:
    mondays = [START + timedelta(days=d) for d in range(0, DAYS, 7)]
    weekly = [(WEEKLY, day, day + timedelta(hours=4), ["h1"]) for day in mondays]
    con = _fleet(NIGHTLY_OOMS, [*_daily(NIGHTLY, 60, 150, ["h1"]), *weekly], shuffle)
    # the backup's process: 48 GiB beside the service's 28 GiB, named in every message of its runs
    con.execute(
        f"""UPDATE oom_events SET {SIZES},
               other_processes = [{{'pid': 40000 + date_diff('day', $start, ts), 'in_use_bytes': 48 * $gib::BIGINT}}]
           WHERE instance = 'h1' AND hour(ts) * 60 + minute(ts) BETWEEN 60 AND 149""",
        {"gib": GIB, "start": START},
    )
    return con


def hourly_and_nightly(shuffle: int | None = None) -> duckdb.DuckDBPyConnection:
    hourly = [run for hour in range(24) for run in _daily(HOURLY, 60 * hour, 60 * hour + 20, ["h1", "h2"])]
    return _fleet(REINDEX_OOMS, [*_daily(REINDEX, 120, 140, ["h1"]), *hourly], shuffle)


def neighbour_seen(shuffle: int | None = None) -> duckdb.DuckDBPyConnection:
    con = _fleet(NEIGHBOUR_OOMS, _daily(EXPORT, 720, 780, ["h2"]), shuffle)
    _list_processes(con, f"({NEIGHBOUR_H2}) OR ({NEIGHBOUR_H3})")
    return con


def neighbour_before_weekly(shuffle: int | None = None) -> duckdb.DuckDBPyConnection:
    mondays = [START + timedelta(days=d) for d in range(0, DAYS, 7)]
    weekly = [(WEEKLY, day + timedelta(minutes=105), day + timedelta(minutes=160), ["h2"]) for day in mondays]
    con = _fleet(ARRIVAL_OOMS, [*_daily(NIGHTLY, 60, 150, ["h2"]), *weekly], shuffle)
    _list_processes(con, ARRIVAL_H2)
    return con


def _list_processes(con: duckdb.DuckDBPyConnection, neighbour: str) -> None:
    """nvidia-smi on h2 and h3 every minute: the service (28 GiB) always, a 48 GiB neighbour (pid 7000 + day on
    h2, 7000 on h3) where `neighbour` holds; the OOM messages there say only what this process held."""
    con.execute(
        f"""INSERT INTO gpu_process_samples (source_id, ts, instance, pid, process_name, used_bytes, origin)
           SELECT 3, $start + to_minutes(i), host, 100, 'serve', 28 * $gib::BIGINT, 'nvsmi_apps'
           FROM range($minutes) t(i), (VALUES ('h2'), ('h3')) h(host)
           UNION ALL
           SELECT 3, $start + to_minutes(i), host, CASE WHEN host = 'h2' THEN 7000 + d ELSE 7000 END, 'notebook',
                  48 * $gib::BIGINT, 'nvsmi_apps'
           FROM (SELECT i, i % 1440 AS m, i // 1440 AS d FROM range($minutes) t(i)), (VALUES ('h2'), ('h3')) h(host)
           WHERE {neighbour}""",
        {"start": START, "minutes": DAYS * 1440, "gib": GIB},
    )
    con.execute(
        f"""UPDATE oom_events SET {SIZES}
           FROM (SELECT event_id, instance AS host, hour(ts) * 60 + minute(ts) AS m, date_diff('day', $start, ts) AS d
                 FROM oom_events) AS e
           WHERE e.event_id = oom_events.event_id AND ({neighbour})""",
        {"gib": GIB, "start": START},
    )


def _effects(con: duckdb.DuckDBPyConnection) -> dict[str, dict]:
    return {row["name"]: row for row in jobs.job_effects(con).to_dicts()}


def _alone(con: duckdb.DuckDBPyConnection) -> dict[str, dict]:
    """job_effects on the data alone: no causal job's minutes, no neighbour's set aside (what issue 35 saw)."""
    minutes = pl.DataFrame(schema={"instance": pl.Utf8, "minute": pl.Datetime("us"), "label": pl.Utf8})
    owners = pl.DataFrame(schema={"name": pl.Utf8, "instance": pl.Utf8, "label": pl.Utf8})
    given = jobs._Given(minutes.drop("label"), minutes, owners)
    hosts = jobs._host_rows(con, given, [], None, None)
    effects = jobs._effects(hosts, jobs.schedules(con), jobs.job_hosts(con))
    return {row["name"]: row for row in effects.to_dicts()}


def _finding(con: duckdb.DuckDBPyConnection, name: str) -> Finding:
    (finding,) = [f for f in scheduled_job.findings(con) if f.subject == f"job {name}"]
    return finding


@pytest.fixture(scope="module")
def weekly() -> duckdb.DuckDBPyConnection:
    return nightly_and_weekly()


@pytest.fixture(scope="module")
def hourly() -> duckdb.DuckDBPyConnection:
    return hourly_and_nightly()


@pytest.fixture(scope="module")
def seen() -> duckdb.DuckDBPyConnection:
    return neighbour_seen()


def test_a_weekly_job_covering_one_run_of_a_causal_nightly_job_is_not_blamed(weekly) -> None:
    alone = _alone(weekly)
    assert alone[WEEKLY]["verdict"] == "reported" and alone[WEEKLY]["lift"] > jobs.MIN_LIFT  # issue 35's 4.1x
    effects = _effects(weekly)
    assert effects[NIGHTLY]["verdict"] == "reported" and effects[NIGHTLY]["causal_rank"] == 1
    assert effects[NIGHTLY]["ooms_in"] == alone[NIGHTLY]["ooms_in"]  # nothing of its own was set aside
    cleared = effects[WEEKLY]
    assert cleared["verdict"] != "reported" and cleared["causal_rank"] is None
    assert cleared["explained_by_jobs"] == [NIGHTLY] and cleared["explained_by_neighbours"] == []
    # its OOM minutes inside the backup's runs are set aside; what is left is the background
    assert cleared["explained_oom_minutes_in"] == cleared["oom_minutes_in"] - cleared["ooms_in"]
    assert cleared["explained_minutes_in"] == 2 * 90 and cleared["minutes_in"] == 2 * (240 - 90)
    assert cleared["lift"] is None or cleared["lift"] < jobs.MIN_LIFT
    assert [f.subject for f in scheduled_job.findings(weekly)] == [f"job {NIGHTLY}"]
    finding = _finding(weekly, NIGHTLY)
    sentence = (
        f"{WEEKLY}: {cleared['explained_oom_minutes_in']} of its {cleared['oom_minutes_in']} OOM minutes overlap "
        f"{NIGHTLY}, already found causal; over its other 5.0 run-hours: {cleared['ooms_in']} OOM"
    )
    assert sentence in finding.evidence
    (other,) = finding.metrics["overlap"]["explains_jobs"]
    assert other["name"] == WEEKLY and other["explained_by_jobs"] == [NIGHTLY]
    # the backup's window recurs in the data alone; found causal, it is no periodic window of its own
    alone = periodicity.periodic_windows(weekly, explained=()).filter(pl.col("recurring"))
    assert alone["instance"].to_list() == ["h1"] and alone["start_hour"].to_list() == [1]
    assert periodic_window.findings(weekly) == []


def test_an_hourly_job_covering_a_causal_nightly_job_is_not_blamed(hourly) -> None:
    alone = _alone(hourly)
    assert alone[HOURLY]["verdict"] == "reported" and alone[HOURLY]["hosts_affected"] == ["h1"]
    effects = _effects(hourly)
    assert effects[REINDEX]["verdict"] == "reported" and effects[REINDEX]["hosts_affected"] == ["h1"]
    assert effects[HOURLY]["verdict"] == "not significant" and effects[HOURLY]["hosts_affected"] == []
    assert effects[HOURLY]["explained_by_jobs"] == [REINDEX]
    assert effects[HOURLY]["explained_minutes_in"] == DAYS * 20  # the reindex's runs, on h1 only
    finding = _finding(hourly, REINDEX)
    assert f"{REINDEX} also explains OOMs that fell in other jobs' windows: {HOURLY}: " in finding.evidence
    assert f"OOM minutes overlap {REINDEX}, already found causal; over its other " in finding.evidence


def test_a_job_overlapping_a_neighbour_process_seen_by_nvidia_smi_is_not_blamed(seen) -> None:
    alone = _alone(seen)
    assert alone[EXPORT]["verdict"] == "reported"
    neighbours = jobs.neighbour_ooms(seen)
    labels = [f"neighbour process {7000 + d}" for d in NEIGHBOUR_DAYS]
    assert sorted(set(neighbours["label"])) == ["neighbour process 7000", *labels]
    row = _effects(seen)[EXPORT]
    assert row["verdict"] != "reported" and row["causal_rank"] is None
    assert row["explained_by_jobs"] == [] and row["explained_by_neighbours"] == labels
    # the minutes of its hour with an OOM while the neighbour ran (every 3rd, and the background's)
    failed = [m for d in NEIGHBOUR_DAYS for m in range(720, 780) if m % 3 == 0 or (d * 1440 + m) % 97 == 0]
    assert row["explained_minutes_in"] == row["explained_oom_minutes_in"] == len(failed)
    assert scheduled_job.findings(seen) == []
    sentence = scheduled_job.overlap_sentence(row)
    assert sentence.startswith(
        f"{row['explained_oom_minutes_in']} of its {row['oom_minutes_in']} OOM minutes overlap neighbour processes "
        "7001, 7003, 7005, 7007, whose memory on the card explains them; over its other "
    )


def test_a_window_a_neighbour_explains_is_not_a_periodic_window(seen) -> None:
    alone = periodicity.periodic_windows(seen, explained=())
    daily = alone.filter(pl.col("recurring"))
    assert daily["instance"].to_list() == ["h3"] and daily["window_utc"].to_list() == ["20:00-21:00"]
    assert periodicity.periodic_windows(seen).filter(pl.col("recurring")).is_empty()
    assert periodic_window.findings(seen) == []


@pytest.mark.parametrize("shuffle", [None, 35])
def test_a_job_that_starts_after_a_neighbour_appeared_did_not_bring_it(shuffle) -> None:
    con = neighbour_before_weekly(shuffle)
    assert _alone(con)[WEEKLY]["verdict"] == "reported"  # what fleet 102222 saw
    effects = _effects(con)
    assert effects[NIGHTLY]["verdict"] == "reported" and effects[NIGHTLY]["hosts_affected"] == ["h2"]
    assert effects[WEEKLY]["verdict"] != "reported" and effects[WEEKLY]["causal_rank"] is None
    # its minutes are the nightly job's, which brings the neighbour: every OOM in its runs (the neighbour's every
    # 3rd minute of 01:45-02:28 on the first night, and the background's)
    assert effects[WEEKLY]["explained_by_jobs"] == [NIGHTLY] and effects[WEEKLY]["explained_by_neighbours"] == []
    failed = {i for i in range(DAYS * 1440) if i % 97 == 0 or (105 <= i < 149 and i % 3 == 0)}
    runs = [range(d * 1440 + 105, d * 1440 + 160) for d in range(0, DAYS, 7)]
    assert effects[WEEKLY]["explained_ooms_in"] == sum(1 for run in runs for i in run if i in failed)
    ooms = sum(1 for i in range(60, 149) if i in failed)  # the OOMs beside the neighbour: 15 + 1 background
    (external,) = causes.external_findings(con, causes.classify_ooms(con))
    assert external.subject == f"job {NIGHTLY}" and external.metrics["ooms"] == ooms


@pytest.mark.parametrize(
    ("fixture", "build"), [("weekly", nightly_and_weekly), ("hourly", hourly_and_nightly), ("seen", neighbour_seen)]
)
def test_shuffled_calendar_rows_give_the_same_findings(request: pytest.FixtureRequest, fixture: str, build) -> None:
    original = request.getfixturevalue(fixture)
    shuffled = build(shuffle=35)
    assert [f.to_json() for f in scheduled_job.findings(shuffled)] == [
        f.to_json() for f in scheduled_job.findings(original)
    ]
    assert jobs.job_effects(shuffled).equals(jobs.job_effects(original))


@pytest.mark.parametrize("shuffle", [None, 35, 36])
def test_a_neighbour_oom_inside_two_jobs_runs_goes_to_the_job_that_explains_ooms_alone(shuffle) -> None:
    """Fleet 15525 of `bench/truth.py --seed 15500`: one neighbour OOM on a host fell where a decoy's only run
    overlapped a causal job's; both jobs hold all (one) of that host's neighbour OOMs. The causal job also
    explains OOMs where it ran alone (h1 every night); the weekly one never did, so the OOM is the nightly's."""
    con = nightly_and_weekly(shuffle)
    monday = START  # a Monday: both jobs run on h2 too that night
    for name, start, end in ((NIGHTLY, 60, 150), (WEEKLY, 0, 240)):
        con.execute(
            "INSERT INTO job_occurrences VALUES (2, 1, ?, ?, ?, ['h2'], 'calendar')",
            [name, monday + timedelta(minutes=start), monday + timedelta(minutes=end)],
        )
    beside = con.sql(
        "SELECT event_id, instance, ts, [p.pid FOR p IN other_processes] AS other_pids FROM oom_events "
        "WHERE instance = 'h1' AND other_processes IS NOT NULL"
    ).pl()
    lone = pl.DataFrame(
        {"event_id": [10**9], "instance": ["h2"], "ts": [monday + timedelta(minutes=90)], "other_pids": [[40000]]},
        schema=beside.schema,
    )
    owners = causes._job_of(con, pl.concat([beside, lone]))
    assert owners.filter(pl.col("event_id") == 10**9)["job"].to_list() == [NIGHTLY]
    assert set(owners["job"]) == {NIGHTLY}
