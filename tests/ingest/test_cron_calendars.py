"""Calendars as fleets write them: crontabs and Kubernetes CronJob manifests (parse/cron_files.py) and systemd timers
(parse/timers.py). The real files of tests/cases/realworld/calendars/ land through the corpus test; here the rules'
finer points, and the sample fleet's backup job given as the crontabs its hosts would hold."""

from __future__ import annotations

import json
import shutil
from datetime import datetime

import duckdb
import polars as pl
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomlab.analyses.fleet import jobs
from oomlab.load import tables
from oomlab.parse.calendar import JobRule, expand
from oomlab.parse.cron_files import (
    job_name,
    looks_like_cronjob,
    looks_like_crontab,
    read_cronjobs,
    read_crontab,
)
from oomlab.parse.timers import looks_like_timer, read_timer
from oomlab.records import Reject

from conftest import FLEET

REALWORLD = FLEET.parents[1] / "tests" / "cases" / "realworld" / "calendars"


@pytest.mark.parametrize(
    ("command", "name"),
    [
        # tests/cases/realworld/calendars 001, 002, 005, 006, 003, 008: as written there
        (
            "cd /cw3e/mead/projects/cwp206/agentization/hydro_ops && /home/mpan/local/miniforge3/bin/conda run "
            "--no-capture-output --name hydro-ops python bin/update_nwm_forcing.py --cycle daily >> x.log 2>&1",
            "update_nwm_forcing",
        ),
        (". $INSTALL_PREFIX/etc/restic/default.sh && cron_mail restic_check.sh", "restic_check"),
        (
            'flock -n ~/.osgpool.lock $d/transfer.sh || echo "ERROR:  Previous transfer cronjob still running"',
            "transfer",
        ),
        ("/sbin/zpool scrub backup >> /var/log/backup/scrub.log 2>&1", "zpool"),
        (
            "cd /app && python -m src.utils.track_performance >> /app/logs/performance.log 2>&1",
            "src.utils.track_performance",
        ),
        ("apt-get update && apt-get upgrade -y >> /var/log/cron/apt-upgrade.log", "apt-get"),
        # wrappers before a program that is no script
        ("nice -n 10 timeout 2h /usr/bin/pg_dump mydb > /backup/db.sql", "pg_dump"),
        ("FOO=1 nohup ionice -c3 rsync -a /data /backup", "rsync"),
        # the command a container tool runs inside
        ("docker exec -u postgres db pg_dumpall > /backup/all.sql", "pg_dumpall"),
        ("/usr/bin/kubectl exec -n ml deploy/vllm -- curl -s localhost:8000/metrics", "curl"),
        ("docker system prune -af", "docker"),
    ],
)
def test_a_cron_command_names_its_job_by_what_it_runs(command, name):
    assert job_name(command) == name


def _rules(path, **kwargs) -> list[JobRule | Reject]:
    return list(read_crontab(path, kwargs.get("tz"), kwargs.get("duration"), kwargs.get("host")))


def test_a_timeout_wrapper_bounds_a_run_and_a_system_crontab_names_its_user(tmp_path):
    """Derived from real case 006 (/etc/cron.d/backup of matthewwall/backup): its nightly backup wrapped in
    `timeout 2h`, as a careful operator writes it, and its scrub as found."""
    real = (REALWORLD / "006_crontab_zfs-backup-server" / "artifact.txt").read_text()
    derived = real.replace("root /opt/backup/bin/backup.sh", "root timeout 2h /opt/backup/bin/backup.sh")
    path = tmp_path / "backup"
    path.write_text(derived)
    by_name = {rule.name: rule for rule in _rules(path) if isinstance(rule, JobRule)}
    assert by_name["backup"].duration_minutes == 120.0
    assert by_name["backup"].cron == "0 23 * * *"
    assert by_name["backup"].hosts is None  # a crontab names no host; --instance gives it
    rejects = [item for item in _rules(path) if isinstance(item, Reject)]
    assert [r.line for r in rejects] == [5, 8, 11]
    assert all("--job-duration MINUTES" in r.reason for r in rejects)
    assert [r.name for r in _rules(path, duration=15.0, host="backup-01")][:2] == ["backup", "reap"]
    assert {r.hosts for r in _rules(path, duration=15.0, host="backup-01")} == {("backup-01",)}


def test_cron_tz_applies_to_the_entries_after_it_and_follows_daylight_saving(tmp_path):
    path = tmp_path / "crontab"
    path.write_text("0 1 * * * /opt/a.sh\nCRON_TZ=Europe/Berlin\n30 2 * * * /opt/b.sh\n")
    first, second = _rules(path, duration=10.0)
    assert first.cron == "0 1 * * *"
    assert second.cron == "CRON_TZ=Europe/Berlin 30 2 * * *"
    runs = [(w.start, w.end) for w in expand(second, datetime(2026, 3, 28), datetime(2026, 3, 31))]
    # 02:30 CET is 01:30 UTC; on 29 March 02:30 does not exist (the clock jumps from 02:00 to 03:00): it is taken
    # an hour later, 03:30 CEST = 01:30 UTC; from then on 02:30 CEST is 00:30 UTC
    assert [start.strftime("%d %H:%M") for start, _ in runs] == ["28 01:30", "29 01:30", "30 00:30"]
    assert all((end - start).total_seconds() == 600 for start, end in runs)


def test_an_unknown_zone_or_schedule_is_a_reject_of_its_line(tmp_path):
    path = tmp_path / "crontab"
    path.write_text("CRON_TZ=Mars/Olympus\n0 1 * * * /opt/a.sh\n@reboot /opt/b.sh\n")
    assert [(r.line, r.reason) for r in _rules(path, duration=10.0)] == [
        (2, "unknown time zone 'Mars/Olympus'"),
        (3, "@reboot runs once at boot, on no calendar"),
    ]


@pytest.mark.parametrize(
    ("text", "crontab"),
    [
        ("# nightly\n0 1 * * * /opt/backup.sh\n", True),
        ("MAILTO=ops@example.com\n@daily /opt/rotate.sh\n", True),
        ("nothing to see here at all\n", False),  # five words are no schedule
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n", False),
        ("0 1 * * * /opt/backup.sh\nTraceback (most recent call last):\n0 2 * * * /opt/x.sh\n", False),
    ],
)
def test_a_crontab_is_only_entries_comments_and_settings(text, crontab):
    assert looks_like_crontab(text) is crontab


def test_cronjobs_of_a_list_and_a_deadline_as_the_run_length(tmp_path):
    """A `kubectl get cronjobs -o yaml` answer (a List), derived from real case 010 (slower-whisper's CronJob):
    its node by kubernetes.io/hostname, its deadline of 21,600 s as six hours, and a second job with neither."""
    real = yaml.safe_load((REALWORLD / "010_cronjob_slower-whisper-gpu-node" / "artifact.yaml").read_text())
    other_job = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "other"},
        "spec": {"schedule": "TZ=Asia/Tokyo 0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {}}}}},
    }
    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [real, other_job]}, sort_keys=False)
    path = tmp_path / "cronjobs.yaml"
    path.write_text(listed)
    assert looks_like_cronjob(listed)
    whisper, other = read_cronjobs(path, None, None)
    assert (whisper.name, whisper.cron, whisper.duration_minutes, whisper.hosts) == (
        "slower-whisper-cron",
        "0 */6 * * *",
        360.0,
        ("gpu-node",),
    )
    assert isinstance(other, Reject) and "states no activeDeadlineSeconds" in other.reason
    given = read_cronjobs(path, None, 20.0)
    assert [r.cron for r in given] == ["0 */6 * * *", "CRON_TZ=Asia/Tokyo 0 3 * * *"]
    # `kubectl get cronjobs -o json` writes the same List as JSON
    as_json = json.dumps({"apiVersion": "v1", "kind": "List", "items": [real, other_job]}, indent=4)
    path.write_text(as_json)
    assert looks_like_cronjob(as_json)
    assert [r.name for r in read_cronjobs(path, None, 20.0)] == ["slower-whisper-cron", "other"]


@pytest.mark.parametrize(
    ("crontab", "schedule"),
    [
        ("0 1 * * * root /opt/backup/bin/nightly-backup.sh >> /var/log/backup.log 2>&1\n", "daily 01:00-02:30 UTC"),
        # the same runs as a host in Berlin writes them: 02:00 CET is 01:00 UTC in November
        (
            "CRON_TZ=Europe/Berlin\n0 2 * * * root /opt/backup/bin/nightly-backup.sh\n",
            "daily 02:00-03:30 Europe/Berlin",
        ),
    ],
)
def test_the_sample_fleets_backup_given_as_its_hosts_crontabs_is_found_alike(
    fleet_db, tmp_path, run_cli, crontab, schedule
):
    """The sample fleet's nightly-backup (calendar_recurring.json: 01:00 UTC for 90 minutes on a10-01, a10-02,
    a10-06 and a100-01) given instead as the one crontab line each of those hosts would hold, ingested per host
    with --instance and --job-duration 90: the same runs, and the job test finds the same; its schedule is told
    in the zone the crontab is written in."""
    copy = tmp_path / "fleet.duckdb"
    shutil.copyfile(fleet_db, copy)
    con = duckdb.connect(str(copy))
    calendar = str((FLEET / "calendar_recurring.json").resolve())
    tables.remove_sources(con, tables.source_ids_for_path(con, calendar))
    con.close()
    for host in ("a10-01", "a10-02", "a10-06", "a100-01"):
        (tmp_path / f"{host}.cron").write_text(crontab)  # the same file on every host
        result = run_cli("ingest", tmp_path / f"{host}.cron", "--db", copy, "--instance", host, "--job-duration", "90")
        assert result.exit_code == 0, result.output
    effects = {}
    for path in (fleet_db, copy):
        with duckdb.connect(str(path), read_only=True) as db:
            rows = jobs.job_effects(db).filter(pl.col("name") == "nightly-backup").to_dicts()
            runs = db.sql(
                "SELECT DISTINCT start_ts, end_ts, unnest(hosts) FROM job_occurrences WHERE name = 'nightly-backup' "
                "ORDER BY ALL"
            ).fetchall()
        (row,) = rows
        effects[path] = (row["ooms_in"], sorted(row["hosts_affected"]), row["verdict"], runs)
    assert effects[copy] == effects[fleet_db]
    with duckdb.connect(str(copy), read_only=True) as db:
        assert jobs.schedules(db)["nightly-backup"].text == schedule
    assert effects[copy][2] == "reported" and effects[copy][0] > 0 and len(effects[copy][3]) == 4 * 23


@pytest.mark.parametrize(
    ("calendar", "cron"),
    [
        ("Mon..Fri 6:00", "0 6 * * mon-fri"),  # real case 016, as written there
        ("daily", "0 0 * * *"),
        ("weekly", "0 0 * * mon"),
        ("*-*-* 02:30:00", "30 2 * * *"),
        ("*:0/15", "0-59/15 * * * *"),
        ("*-*-* 00/4:00:00", "0 0-23/4 * * *"),
        ("Sat,Sunday 03:00 Europe/Berlin", "CRON_TZ=Europe/Berlin 0 3 * * sat,sun"),
        ("*-*-01 04:00:00 UTC", "0 4 1 * *"),
        ("quarterly", "0 0 1 1,4,7,10 *"),
    ],
)
def test_a_timers_calendar_is_its_cron(calendar, cron, tmp_path):
    path = tmp_path / "model-sync.timer"
    path.write_text(f"[Unit]\nDescription=sync\n\n[Timer]\nOnCalendar={calendar}\nPersistent=true\n")
    assert looks_like_timer(path.read_text())
    (rule,) = read_timer(path, None, 10.0, None)
    assert (rule.name, rule.cron, rule.line) == ("model-sync", cron, 5)


def test_a_timer_names_its_unit_and_widens_its_runs_by_their_random_delay(tmp_path):
    """Derived from real case 016 (MrOnak/cli_backup's backup.homedir.timer): as found, its job is the service of
    the timer's own name; with `Unit=`, a second OnCalendar= and a RandomizedDelaySec added, that unit, both
    calendars, and runs 30 minutes longer (each may start up to 30 minutes after its time). A calendar cron
    cannot say, or a timer without a calendar, is a reject naming its line."""
    real = (REALWORLD / "016_timer_cli-backup-weekdays" / "artifact.timer").read_text()
    path = tmp_path / "backup.homedir.timer"
    path.write_text(real)
    (rule,) = read_timer(path, None, 20.0, "ws-07")
    assert (rule.name, rule.cron, rule.duration_minutes, rule.hosts) == (
        "backup.homedir",
        "0 6 * * mon-fri",
        20.0,
        ("ws-07",),
    )
    (reject,) = read_timer(path, None, None, None)
    assert (reject.line, reject.reason) == (
        21,
        "OnCalendar=Mon..Fri 6:00: a timer states no duration: give how long a run lasts with --job-duration MINUTES",
    )
    derived = real.replace(
        "OnCalendar=Mon..Fri 6:00\n",
        "OnCalendar=Mon..Fri 6:00\nOnCalendar=Sat *-*-* 10:00:30\nOnCalendar=Sun 12:00\n"
        "RandomizedDelaySec=30min\nUnit=home-backup.service\n",
    )
    path.write_text(derived)
    weekdays, seconds, sunday = read_timer(path, None, 20.0, None)
    assert (weekdays.name, weekdays.duration_minutes, sunday.cron) == ("home-backup", 50.0, "0 12 * * sun")
    assert seconds.reason == "OnCalendar=Sat *-*-* 10:00:30: runs at seconds other than :00, which cron cannot say"
    path.write_text(real.replace("OnCalendar=Mon..Fri 6:00", "OnBootSec=15min\nOnUnitActiveSec=1d"))
    assert [(r.line, r.reason) for r in read_timer(path, None, 20.0, None)] == [
        (21, "OnBootSec=15min runs relative to boot or to its last run, on no calendar"),
        (22, "OnUnitActiveSec=1d runs relative to boot or to its last run, on no calendar"),
    ]


_PIECES = [
    "0 1 * * * /opt/a.sh", "@daily b.sh", "@reboot x", "CRON_TZ=Europe/Berlin", "CRON_TZ=", "root", "timeout",
    "-s", "1h", "%", "\\", "'", '"', "&&", "|", "kind: CronJob", "apiVersion: batch/v1", "spec:", "  schedule:",
    "  timeZone: [1, 2]", "metadata: {name: [a]}", "- &a [x, x]", "- *a", "---", "[Timer]", "OnCalendar=",
    "OnCalendar=Mon..Fri 6:00", "RandomizedDelaySec=5parsecs", "Unit=", "*-*-* 1/0:00", "~", "..", "\t", "\n",
]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_PIECES), max_size=30).map(" ".join))
def test_any_text_gives_rules_or_rejects_never_a_traceback(tmp_path, text):
    path = tmp_path / "calendar"
    path.write_text(text)
    for read in (
        lambda: read_crontab(path, None, 10.0, None),
        lambda: read_cronjobs(path, None, 10.0),
        lambda: read_timer(path, None, 10.0, None),
    ):
        assert all(isinstance(item, JobRule | Reject) for item in read())


def test_a_yaml_alias_bomb_costs_nothing(tmp_path):
    """A manifest whose schedule is an alias that would expand a billion-fold: a reject, read at once."""
    levels = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 10))
    path = tmp_path / "bomb.yaml"
    path.write_text(
        f"apiVersion: batch/v1\nkind: CronJob\nl0: &l0 [x]\n{levels}metadata: {{name: *l9}}\n"
        "spec: {schedule: '0 1 * * *'}\n"
    )
    (reject,) = read_cronjobs(path, None, 10.0)
    assert reject.reason == "CronJob '': metadata.name is not text"


def test_a_helm_template_is_a_reject_that_says_to_render_it(tmp_path):
    """A chart's templates/cronjob.yaml as charts write it: Go templates are no YAML until `helm template`."""
    path = tmp_path / "cronjob.yaml"
    path.write_text(
        'apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: {{ include "chart.fullname" . }}-backup\nspec:\n'
        "  schedule: {{ .Values.backup.schedule | quote }}\n"
    )
    (reject,) = read_cronjobs(path, None, 10.0)
    assert reject.line == 4
    assert reject.reason.endswith("; a Helm template is read once rendered (`helm template`)")


def test_the_sql_names_the_calendar_kinds_the_registry_has(db):
    """oomlab_is_calendar (sql/macros) holds the kinds of parse/formats.py's calendar family, no more, no fewer."""
    from oomlab.load.connection import connect
    from oomlab.parse import formats

    kinds = [fmt.name for fmt in formats.FORMATS] + ["text", "jsonl"]
    with connect(db) as con:
        found = {kind for kind in kinds if con.execute("SELECT oomlab_is_calendar(?)", [kind]).fetchall()[0][0]}
    assert found == {fmt.name for fmt in formats.FORMATS if fmt.family == formats.CALENDAR_FAMILY}
