"""Scheduled jobs against OOMs: the sample fleet's planted backup is found with its window and hosts, no
decoy is, and a tiny fleet built here gives the exact counts and p-values."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import duckdb
import polars as pl
import pytest
from scipy import stats

from oomlab.analyses.fleet import jobs
from oomlab.analyses.fleet.rate_tests import holm, pooled_rate_ratio, rate_ratio, rate_ratio_p
from oomlab.findings import scheduled_job
from oomlab.findings.finding import Finding
from oomlab.load.sql import apply_schema

from conftest import FLEET

TRUTHS = json.loads((FLEET / "truths.json").read_text())
BACKUP = TRUTHS["backup"]
DECOYS = [d["name"] for d in TRUTHS["decoys"]]
START = datetime(2026, 1, 5)  # a Monday
DAYS = 10


Job = tuple[str, int, int, list[str] | None]


def tiny_fleet(oom_rule: str, jobs_: list[Job]) -> duckdb.DuckDBPyConnection:
    """Hosts h1-h3, one request a minute each for DAYS days; `oom_rule` (SQL over `host`, `m` = minute of
    day, `d` = day) marks the OOMs; each job (name, start minute, end minute, hosts) runs daily."""
    con = duckdb.connect()
    apply_schema(con)
    con.execute(
        f"""
        INSERT INTO requests (ts, instance, status, source_id)
        SELECT $start + to_minutes(i), host, CASE WHEN {oom_rule} THEN 'oom' ELSE 'ok' END, 1
        FROM (SELECT i, i % 1440 AS m, i // 1440 AS d FROM range($minutes) t(i)),
             (VALUES ('h1'), ('h2'), ('h3')) h(host)""",
        {"start": START, "minutes": DAYS * 1440},
    )
    con.execute(
        "INSERT INTO oom_events (source_id, ts, instance, origin) "
        "SELECT 1, ts, instance, 'structured' FROM requests WHERE status = 'oom'"
    )
    for name, start, end, hosts in jobs_:
        for day in range(DAYS):
            base = START + timedelta(days=day)
            con.execute(
                "INSERT INTO job_occurrences VALUES (2, 1, ?, ?, ?, ?, 'cron')",
                [name, base + timedelta(minutes=start), base + timedelta(minutes=end), hosts],
            )
    return con


# h1: an OOM every 6th minute of 03:00-04:00 (10 a night); everyone: one every 97 minutes
SPIKE = "(host = 'h1' AND m >= 180 AND m < 240 AND m % 6 = 0) OR (i % 97 = 0)"


@pytest.fixture(scope="module")
def tiny() -> duckdb.DuckDBPyConnection:
    return tiny_fleet(SPIKE, [("backup", 180, 240, ["h1", "h2"]), ("decoy", 720, 750, None)])


def _background(host_minutes: range, inside) -> int:
    return sum(1 for i in host_minutes if i % 97 == 0 and inside(i % 1440))


def test_tiny_fleet_counts_and_p_values_are_exact(tiny) -> None:
    hosts = jobs.host_effects(tiny).filter(pl.col("name") == "backup")
    h1 = hosts.filter(pl.col("instance") == "h1").row(0, named=True)
    minutes = range(DAYS * 1440)
    inside_bg = _background(minutes, lambda m: 180 <= m < 240 and m % 6 != 0)
    ooms_in = 10 * DAYS + inside_bg
    ooms_out = _background(minutes, lambda m: not 180 <= m < 240)
    assert (h1["requests_in"], h1["requests_out"]) == (60 * DAYS, 1380 * DAYS)
    assert (h1["ooms_in"], h1["ooms_out"]) == (ooms_in, ooms_out)
    assert h1["p_value"] == pytest.approx(stats.binom.sf(ooms_in - 1, ooms_in + ooms_out, 60 / 1440))
    assert h1["lift"] == pytest.approx((ooms_in / 60) / (ooms_out / 1380))
    assert h1["affected"] and h1["on_job_host"]
    h2 = hosts.filter(pl.col("instance") == "h2").row(0, named=True)
    assert h2["on_job_host"] and not h2["affected"]
    h3 = hosts.filter(pl.col("instance") == "h3").row(0, named=True)
    assert not h3["on_job_host"] and h3["p_adjusted"] is None  # the control


def test_tiny_fleet_reports_the_job_on_the_affected_host_only(tiny) -> None:
    (finding,) = scheduled_job.findings(tiny)
    assert finding.kind == "scheduled_job" and finding.subject == "job backup"
    assert finding.metrics["hosts_affected"] == ["h1"] and finding.metrics["hosts_not_affected"] == ["h2"]
    assert finding.window.recurring == "daily 03:00-04:00 UTC"
    assert finding.advice == "Move backup out of its window 03:00-04:00 UTC or off hosts h1."
    assert finding.impact == pytest.approx(10 * DAYS, abs=3)
    effects = jobs.job_effects(tiny).filter(pl.col("name") == "decoy").row(0, named=True)
    assert effects["verdict"] == "not significant" and effects["hosts"] == ["h1", "h2", "h3"]
    assert effects["control_hosts"] == []  # NULL hosts: every instance runs it


def test_a_job_whose_control_hosts_show_the_same_excess_is_not_blamed() -> None:
    everyone = "(m >= 180 AND m < 240 AND m % 6 = 0) OR (i % 97 = 0)"
    con = tiny_fleet(everyone, [("backup", 180, 240, ["h1"])])
    row = jobs.job_effects(con).row(0, named=True)
    assert row["hosts_affected"] == ["h1"] and row["verdict"] == "control also elevated"
    assert scheduled_job.findings(con) == []


# h1 and h2: an OOM at 03:20 on three nights each (3 a host, under a host's 5); everyone: one every 997 minutes
# outside 03:00-04:00
BACKGROUND = "(i % 997 = 0 AND NOT (m >= 180 AND m < 240))"
THIN = f"(host IN ('h1', 'h2') AND m = 200 AND d IN (1, 4, 7)) OR {BACKGROUND}"


def test_a_job_acting_a_little_on_each_host_is_found_over_its_hosts_together() -> None:
    con = tiny_fleet(THIN, [("backup", 180, 240, ["h1", "h2"]), ("decoy", 720, 750, None)])
    hosts = jobs.host_effects(con).filter(pl.col("name") == "backup", pl.col("on_job_host"))
    assert hosts["ooms_in"].to_list() == [3, 3] and jobs.MIN_OOMS_INSIDE == 5
    assert hosts["pooled"].all() and hosts["affected"].all()
    (finding,) = scheduled_job.findings(con)
    assert finding.subject == "job backup" and finding.metrics["pooled"] is True
    assert finding.metrics["hosts_affected"] == ["h1", "h2"] and finding.metrics["ooms_in"] == 6
    assert "No host alone had 5 OOMs inside" in finding.evidence
    # 6 OOMs inside against the hour's share of each host's OOMs (1.4), tested exactly
    row = jobs.job_effects(con).filter(pl.col("name") == "backup").row(0, named=True)
    assert row["expected_in"] == pytest.approx(1.42, abs=0.01)
    assert row["p_value"] == pytest.approx(stats.poisson.sf(5, row["expected_in"]))
    decoy = jobs.job_effects(con).filter(pl.col("name") == "decoy").row(0, named=True)
    assert decoy["verdict"] != "reported" and not decoy["pooled"]


def test_a_thin_job_needs_the_hosts_bars_over_its_hosts_together() -> None:
    """Two OOMs inside in all: improbable from traffic, yet under the 5 a host's test asks; no finding."""
    rule = f"(host IN ('h1', 'h2') AND m = 200 AND d = 3) OR {BACKGROUND}"
    con = tiny_fleet(rule, [("backup", 180, 240, ["h1", "h2"])])
    row = jobs.job_effects(con).row(0, named=True)
    assert row["ooms_in"] == 2 and row["verdict"] == "not significant" and not row["pooled"]


def test_glob_selectors_select_the_same_hosts_as_their_names(tiny) -> None:
    globbed = tiny_fleet(SPIKE, [("backup", 180, 240, ["h[12]"]), ("decoy", 720, 750, ["h?"])])
    for name in ("backup", "decoy"):
        by_glob = jobs.host_effects(globbed).filter(pl.col("name") == name)
        assert by_glob.equals(jobs.host_effects(tiny).filter(pl.col("name") == name))
    row = jobs.job_effects(globbed).filter(pl.col("name") == "backup").row(0, named=True)
    assert (row["selectors"], row["hosts_matched"], row["unmatched_selectors"]) == (["h[12]"], ["h1", "h2"], [])
    assert row["hosts"] == ["h1", "h2"] and row["control_hosts"] == ["h3"] and row["verdict"] == "reported"


def test_a_selector_matching_no_instance_is_said_and_makes_no_control() -> None:
    con = tiny_fleet(SPIKE, [("backup", 180, 240, ["h1", "gpu-*"]), ("ghost", 180, 240, ["infer-b-*"])])
    # no host of ghost's is in the data: no instance is known to be without it, so none is its control
    assert jobs.host_effects(con).filter(pl.col("name") == "ghost").is_empty()
    effects = {r["name"]: r for r in jobs.job_effects(con).to_dicts()}
    ghost = effects["ghost"]
    assert ghost["verdict"] == "no host matched" and ghost["unmatched_selectors"] == ["infer-b-*"]
    assert ghost["hosts"] == [] and ghost["control_hosts"] == [] and ghost["ooms_in"] == 0
    backup = effects["backup"]  # the selector that matches counts; the other is said
    assert backup["hosts"] == ["h1"] and backup["control_hosts"] == ["h2", "h3"]
    assert backup["unmatched_selectors"] == ["gpu-*"] and backup["verdict"] == "reported"
    (finding,) = scheduled_job.findings(con)
    assert finding.metrics["unmatched_selectors"] == ["gpu-*"]
    assert finding.evidence.endswith(" Calendar host gpu-* matched no instance.")


def test_rate_tests_on_known_numbers() -> None:
    assert rate_ratio_p(0, 10.0, 5, 90.0) == 1.0
    assert rate_ratio_p(5, 10.0, 5, 90.0) == pytest.approx(stats.binom.sf(4, 10, 0.1))
    assert rate_ratio(5, 10.0, 5, 90.0) == pytest.approx(9.0)
    assert rate_ratio(5, 10.0, 0, 90.0) is None
    # scale does not matter: a host measured by a traffic profile pools like one with counted requests
    assert pooled_rate_ratio([(5, 10.0, 5, 90.0), (2, 1.0, 2, 9.0)]) == pytest.approx(9.0)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_schedules_are_described_as_people_say_them() -> None:
    day = timedelta(days=1)
    daily = [(START + n * day + timedelta(hours=1), START + n * day + timedelta(hours=2, minutes=30)) for n in range(3)]
    assert jobs.describe_schedule(daily).text == "daily 01:00-02:30 UTC"
    saturday = datetime(2026, 11, 7, 13)
    weekly = [(saturday + n * 7 * day, saturday + n * 7 * day + timedelta(hours=3)) for n in range(3)]
    assert jobs.describe_schedule(weekly).text == "weekly on Saturday 13:00-16:00 UTC"
    assert jobs.describe_schedule(weekly[:1]).text == "on 2026-11-07 13:00-16:00 UTC"


# --- the sample fleet (truths.json) ---


@pytest.fixture(scope="module")
def fleet_findings(fleet_db) -> list[Finding]:
    con = duckdb.connect(str(fleet_db), read_only=True)
    try:
        return scheduled_job.findings(con)
    finally:
        con.close()


def test_backup_is_reported_with_its_window_and_affected_hosts(fleet_findings) -> None:
    (backup,) = [f for f in fleet_findings if f.metrics["name"] == BACKUP["job"]]
    assert backup.kind == "scheduled_job"
    assert backup.metrics["windows_utc"] == [BACKUP["window_utc"]]
    assert backup.window.recurring == f"daily {BACKUP['window_utc']} UTC"
    assert backup.metrics["hosts_affected"] == BACKUP["affected_hosts"]  # a10-06 from its text log
    assert backup.metrics["hosts_not_affected"] == BACKUP["unaffected_hosts"]  # a100-01 runs it, no OOM
    # lift None: no OOM outside its windows once the process's own are set aside (a10-06's text log: the card's
    # accounting shows its own memory only, rule own_memory)
    assert (backup.metrics["lift"] is None or backup.metrics["lift"] > 5) and backup.metrics["p_value"] < 1e-30
    assert backup.metrics["control_p_value"] > 0.05  # the other hosts see nothing at 01:00-02:30
    # impact: excess OOMs explained, near the 162 the generator caused (within 10 %)
    assert backup.impact == pytest.approx(BACKUP["ooms"], rel=0.1)
    assert "a10-01, a10-02, a10-06" in backup.advice and BACKUP["window_utc"] in backup.advice
    assert backup.confidence >= 0.9
    logged = [h for h in BACKUP["affected_hosts"] if h != "a10-06"]  # a10-06 has no counted requests
    # OOMs the backup caused (those a fresh process fails anyway, too large for the card, are left out)
    caused = sum(BACKUP["ooms_by_host"][h] for h in logged)
    rate_in = 1000 * caused / sum(BACKUP["in_window"][h]["requests"] for h in logged)
    assert backup.metrics["rate_in_per_1k"] == pytest.approx(rate_in)
    assert backup.metrics["rate_in_per_1k"] > 5 * backup.metrics["rate_out_per_1k"]
    tests = {t["instance"]: t for t in backup.metrics["host_tests"]}
    assert sorted(tests) == sorted(BACKUP["calendar_hosts"]) and not tests["a100-01"]["affected"]
    assert tests["a10-06"]["traffic_source"] == "fleet_profile" and tests["a10-06"]["rate_in_per_1k"] is None
    json.dumps(backup.to_json(), default=str)  # the JSON `oomlab findings --json` writes


def test_no_decoy_is_reported(fleet_findings) -> None:
    assert [f.subject for f in fleet_findings] == [f"job {BACKUP['job']}"]
    assert not {f.metrics["name"] for f in fleet_findings} & set(DECOYS)


def test_backup_window_counts_equal_truths(fleet_con) -> None:
    hosts = jobs.host_effects(fleet_con).filter(pl.col("name") == BACKUP["job"])
    rows = {r["instance"]: r for r in hosts.to_dicts()}
    for host in BACKUP["calendar_hosts"]:
        inside, outside = BACKUP["in_window"][host], BACKUP["outside_window"][host]
        row = rows[host]
        counted = (row["ooms_in"] + row["intrinsic_in"], row["ooms_out"] + row["intrinsic_out"])
        assert counted == (inside["ooms"], outside["ooms"])
        # what is left inside, once OOMs too large for the card on any baseline are set aside, is exactly
        # what the backup caused; a text-log host's OOMs are sized by the request line each failure logged
        assert row["ooms_in"] == BACKUP["ooms_by_host"].get(host, 0)
        if rows[host]["traffic_source"] == "requests":
            assert (rows[host]["requests_in"], rows[host]["requests_out"]) == (inside["requests"], outside["requests"])
        assert rows[host]["affected"] == (host in BACKUP["affected_hosts"])


def test_decoy_windows_hold_the_planted_ooms_and_no_excess(fleet_con) -> None:
    effects = {r["name"]: r for r in jobs.job_effects(fleet_con).to_dicts()}
    for decoy in TRUTHS["decoys"]:
        row = effects[decoy["name"]]
        assert row["ooms_in"] + row["intrinsic_in"] == decoy["ooms_inside"]
        assert row["hosts_affected"] == [] and row["verdict"] != "reported"
        assert row["p_value"] > 0.05
