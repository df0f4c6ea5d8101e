"""Calendar host selectors over the sample fleet: its backup hosts renamed so that `a10-0[1-3]` and `infer-b-*`
select them, its calendars rewritten with globs (CSV and JSON, occurrences and cron rules). The backup is found
on exactly the hosts its selectors match, with the planted counts; a selector that matches nothing is said
and gives no control; the backup's external-pressure OOMs are tied to it and merged into one finding."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner

from oomlab.analyses.fleet import jobs
from oomlab.cli.main import cli
from oomlab.findings import scheduled_job
from oomlab.findings.collect import collect_findings
from oomlab.report.weekly_data import job_windows, report_window

from conftest import FLEET

TRUTHS = json.loads((FLEET / "truths.json").read_text())
BACKUP = TRUTHS["backup"]
DECOYS = {d["name"]: d for d in TRUTHS["decoys"]}
# a10-06 (the backup's text-log host) takes a10-03's name, so that `a10-0[1-3]` is the backup's three A10s;
# a10-03 (a leak host) moves to a10-07; the backup's A100 becomes infer-b-01.
RENAME = {"a10-03": "a10-07", "a10-06": "a10-03", "a100-01": "infer-b-01"}
BACKUP_SELECTORS = ["a10-0[1-3]", "infer-b-*", "infer-c-*"]  # infer-c-* matches nothing


def _renamed(hosts: list[str]) -> list[str]:
    return sorted(RENAME.get(h, h) for h in hosts)


def _fleet_files(out: Path) -> list[Path]:
    """The sample fleet's logs, the renamed hosts' files rewritten under `out` (request logs name their
    instance in every row; text logs and nvidia-smi files by their file name)."""
    files = []
    for path in sorted(FLEET.glob("*/*.gz")):
        host = path.name.split(".")[0]
        if host not in RENAME:
            files.append(path)
            continue
        target = out / path.name.replace(host, RENAME[host], 1)
        if path.parent.name == "requests":
            text = gzip.decompress(path.read_bytes()).decode()
            target.write_bytes(
                gzip.compress(text.replace(f'"instance": "{host}"', f'"instance": "{RENAME[host]}"').encode(), 1)
            )
        else:
            shutil.copyfile(path, target)
        files.append(target)
    return files


def _calendars(out: Path) -> list[Path]:
    """The sample fleet's jobs with glob selectors; a job on hosts that are not in the data; a bad selector."""
    rules = [
        {"name": BACKUP["job"], "cron": BACKUP["cron"], "duration_minutes": BACKUP["duration_minutes"]}
        | {"hosts": BACKUP_SELECTORS},
        {"name": "log-rotate", "cron": "0 0 * * *", "duration_minutes": 10, "hosts": "*"},
    ]
    sweeps = [
        {
            "name": "eval-sweep",
            "start": f"{day}T13:00:00Z",
            "end": f"{day}T16:00:00Z",
            "hosts": "a100-0[2-3]",
        }
        for day in ("2026-11-21", "2026-11-28", "2026-12-05")
    ]
    files = {
        "rules.json": json.dumps(rules),
        "rules.csv": "name,cron,duration_minutes,hosts\nmetrics-export,30 */6 * * *,15,*\n"
        "gpu-burn-in,0 12 * * 3,60,infer-z-0[1-4]\n",
        "occurrences.json": json.dumps(sweeps),
        "occurrences.csv": "name,start,end,hosts\ndisk-scrub,2026-11-25T14:00:00Z,2026-11-25T15:00:00Z,a10-07|a10-04\n"
        "typo,2026-11-26T14:00:00Z,2026-11-26T15:00:00Z,a10-0[1-3\n",
    }
    for name, text in files.items():
        (out / name).write_text(text)
    return [out / name for name in files]


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    out = tmp_path_factory.mktemp("globbed")
    calendars = _calendars(out)
    result = CliRunner().invoke(cli, ["ingest", *map(str, [*_fleet_files(out), *calendars]), "--db", str(out / "db")])
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(out / "db"), read_only=True)
    yield con, result.stderr, calendars
    con.close()


@pytest.fixture(scope="module")
def con(ingested):
    return ingested[0]


@pytest.fixture(scope="module")
def effects(con) -> dict[str, dict]:
    return {r["name"]: r for r in jobs.job_effects(con).to_dicts()}


def test_a_selector_that_is_no_glob_is_a_reject_with_its_line(ingested):
    _, stderr, calendars = ingested
    assert f"{calendars[3]}:3: host selector 'a10-0[1-3' has a [ without its ]" in stderr


def test_the_backup_runs_on_exactly_the_hosts_its_selectors_match(effects):
    row = effects[BACKUP["job"]]
    assert row["selectors"] == BACKUP_SELECTORS and row["unmatched_selectors"] == ["infer-c-*"]
    assert row["hosts_matched"] == row["hosts"] == _renamed(BACKUP["calendar_hosts"])
    assert row["hosts_affected"] == _renamed(BACKUP["affected_hosts"]) == ["a10-01", "a10-02", "a10-03"]
    assert row["hosts_not_affected"] == _renamed(BACKUP["unaffected_hosts"]) == ["infer-b-01"]
    assert row["verdict"] == "reported"


def test_the_backup_counts_are_the_planted_ones(con):
    rows = {r["instance"]: r for r in jobs.host_effects(con).filter(pl.col("name") == BACKUP["job"]).to_dicts()}
    for host in BACKUP["calendar_hosts"]:
        row, inside, outside = rows[RENAME.get(host, host)], BACKUP["in_window"][host], BACKUP["outside_window"][host]
        counted = (row["ooms_in"] + row["intrinsic_in"], row["ooms_out"] + row["intrinsic_out"])
        assert row["on_job_host"] and counted == (inside["ooms"], outside["ooms"])
        if row["traffic_source"] == "requests":
            assert (row["requests_in"], row["requests_out"]) == (inside["requests"], outside["requests"])
    # the control: every other instance with traffic (a100-06 has none: a text log without OOMs)
    controls = sorted(h for h, r in rows.items() if not r["on_job_host"])
    assert controls == ["a10-04", "a10-05", "a10-07", "a100-02", "a100-03", "a100-04", "a100-05"]


def test_decoys_selected_by_globs_hold_their_planted_ooms(effects):
    for name, selected in (("eval-sweep", "a100-0[2-3]"), ("disk-scrub", "a10-04")):
        row = effects[name]
        assert row["hosts"] == _renamed(DECOYS[name]["hosts"]) and selected in row["selectors"]
        assert row["ooms_in"] + row["intrinsic_in"] == DECOYS[name]["ooms_inside"] and row["verdict"] != "reported"
    every = effects["log-rotate"]  # `*`: every instance the data knows; a100-06 has nothing to test
    assert every["selectors"] == [] and every["hosts_without_traffic"] == ["a100-06"]
    assert every["hosts_matched"] == _renamed(DECOYS["log-rotate"]["hosts"])
    assert every["ooms_in"] + every["intrinsic_in"] == DECOYS["log-rotate"]["ooms_inside"]


def test_a_job_whose_selector_matches_nothing_is_said_and_has_no_control(con, effects):
    row = effects["gpu-burn-in"]
    assert row["verdict"] == "no host matched" and row["unmatched_selectors"] == ["infer-z-0[1-4]"]
    assert row["hosts_matched"] == row["hosts"] == row["control_hosts"] == []
    assert jobs.host_effects(con).filter(pl.col("name") == "gpu-burn-in").is_empty()


def test_the_finding_names_the_matched_hosts_and_the_selector_that_matched_nothing(con):
    (finding,) = scheduled_job.findings(con)
    assert finding.subject == f"job {BACKUP['job']}"
    assert finding.metrics["hosts"] == ["a10-01", "a10-02", "a10-03", "infer-b-01"]
    assert finding.metrics["unmatched_selectors"] == ["infer-c-*"]
    assert [t["instance"] for t in finding.metrics["host_tests"]] == finding.metrics["hosts"]
    assert finding.evidence.startswith(
        f"{BACKUP['job']} runs daily {BACKUP['window_utc']} UTC on a10-01, a10-02, a10-03, infer-b-01 "
        "(calendar hosts a10-0[1-3], infer-b-*, infer-c-*). "
    )
    assert finding.evidence.endswith(" Calendar host infer-c-* matched no instance.")
    assert (
        finding.advice
        == f"Move {BACKUP['job']} out of its window {BACKUP['window_utc']} UTC or off hosts a10-01, a10-02, a10-03."
    )
    assert finding.impact == pytest.approx(BACKUP["ooms"], rel=0.1)


@pytest.fixture(scope="module")
def collected(con):
    return collect_findings(con)


def test_the_backups_external_pressure_ooms_are_one_story_with_the_job(collected):
    (story,) = [f for f in collected if f.subject == f"job {BACKUP['job']}"]
    assert story.kind == "scheduled_job"
    (external,) = story.metrics["related"]
    assert external["kind"] == "external_pressure" and external["metrics"]["job"] == BACKUP["job"]
    assert external["metrics"]["hosts"] == _renamed(BACKUP["affected_hosts"])
    assert external["metrics"]["ooms"] >= BACKUP["ooms"]  # the planted 162, and capacity OOMs beside it
    assert f"move job {BACKUP['job']} off a10-01, a10-02, a10-03" in external["advice"]
    # no neighbour finding is left on a backup host: every one of its external OOMs went to the job
    hosts = {h for f in collected if f.kind == "external_pressure" for h in f.metrics["hosts"]}
    assert not hosts & set(_renamed(BACKUP["calendar_hosts"]))


def test_the_weekly_jobs_section_lists_matched_hosts_and_unmatched_selectors(con, collected):
    section = {j["name"]: j for j in job_windows(con, report_window(con, None, None), collected)}
    backup = section[BACKUP["job"]]
    assert backup["blamed"] and backup["hosts"] == ["a10-01", "a10-02", "a10-03", "infer-b-01"]
    assert backup["unmatched_selectors"] == ["infer-c-*"]
    burn_in = section["gpu-burn-in"]
    assert burn_in["hosts"] == [] and burn_in["unmatched_selectors"] == ["infer-z-0[1-4]"]
    assert (burn_in["schedule"], burn_in["runs"], burn_in["spans"]) == (None, None, [])
