"""Calendars of scheduled jobs: occurrences and cron rules, expanded over the data's time range."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from conftest import H200


def test_occurrences_csv(tmp_path, db, run_cli, sql):
    path = tmp_path / "calendar.csv"
    path.write_text(
        "name,start,end,hosts\nbackup,2026-11-30T01:00:00Z,2026-11-30T02:30:00Z,gpu-a-0;gpu-b-1\n"
        "logrotate,2026-11-30T03:00:00Z,2026-11-30T03:05:00Z,*\n"
        "broken,2026-11-30T05:00:00Z,2026-11-30T04:00:00Z,gpu-a-0\n"
    )
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0
    assert sql("SELECT kind, rows, rejects FROM sources") == [("calendar", 2, 1)]
    assert sql(
        "SELECT name, strftime(start_ts, '%H:%M'), strftime(end_ts, '%H:%M'), hosts, origin "
        "FROM job_occurrences ORDER BY start_ts"
    ) == [
        ("backup", "01:00", "02:30", ["gpu-a-0", "gpu-b-1"], "calendar"),
        ("logrotate", "03:00", "03:05", None, "calendar"),
    ]
    assert f"{path}:4: end 2026-11-30 04:00:00 is before start 2026-11-30 05:00:00" in result.stderr


def test_recurring_jobs_cover_data_ingested_before_or_after(tmp_path, db, run_cli, sql):
    rules = tmp_path / "jobs.json"
    rules.write_text(
        json.dumps(
            [
                {"name": "backup", "cron": "45 1 * * *", "duration_minutes": 90, "hosts": ["gpu-b-1"]},
                {"name": "export", "cron": "*/20 * * * *", "duration_minutes": 5, "hosts": "*"},
                {"name": "bad", "cron": "not a cron", "duration_minutes": 5, "hosts": "*"},
            ]
        )
    )
    assert run_cli("ingest", rules, "--db", db).exit_code == 0
    assert sql("SELECT count(*) FROM job_occurrences") == [(0,)]  # no data yet: nothing to cover
    # serve_mixed ran 01:49:50-01:50:26 on 2026-11-30: expanded runs now cover that day +- 1
    assert run_cli("ingest", H200 / "serve_mixed" / "requests.jsonl.gz", "--db", db).exit_code == 0
    backups = sql(
        "SELECT strftime(start_ts, '%Y-%m-%d %H:%M'), strftime(end_ts, '%H:%M'), hosts "
        "FROM job_occurrences WHERE name = 'backup' ORDER BY start_ts"
    )
    assert backups == [
        ("2026-11-29 01:45", "03:15", ["gpu-b-1"]),
        ("2026-11-30 01:45", "03:15", ["gpu-b-1"]),
        ("2026-12-01 01:45", "03:15", ["gpu-b-1"]),
    ]
    inside = sql(
        "SELECT count(*) FROM oom_events o JOIN job_occurrences j ON o.ts BETWEEN j.start_ts AND j.end_ts "
        "AND list_contains(j.hosts, o.instance) WHERE j.name = 'backup'"
    )
    assert inside == [(4,)]
    # runs of every 20 minutes overlapping 2026-11-29 01:49:50 .. 2026-12-01 01:50:26: 02:00 ... 01:40
    assert sql("SELECT count(*), min(start_ts), max(start_ts) FROM job_occurrences WHERE name = 'export'") == [
        (144, datetime(2026, 11, 29, 2, 0), datetime(2026, 12, 1, 1, 40))
    ]
    assert [line for line, _ in sql("SELECT line, reason FROM rejects")] == [3]


def test_a_ragged_row_is_rejected_with_the_fix_not_misread(tmp_path, db, run_cli, sql):
    """Issue 14, item 8: an unquoted day list splits the cron expression over the columns after it
    (`0 14 * * 3` / duration 6 / hosts 40 / host-*), and the extra field used to be dropped silently."""
    path = tmp_path / "calendar.csv"
    path.write_text('name,cron,duration_minutes,hosts\nsync,0 14 * * 3,6,40,host-*\nbackup,"0 1 * * 3,6",90,a10-*\n')
    result = run_cli("ingest", path, "--db", db)
    assert result.exit_code == 0
    assert sql("SELECT kind, rows, rejects FROM sources") == [("calendar", 1, 1)]
    assert sql("SELECT name, cron, duration_minutes, hosts FROM calendar_rules") == [
        ("backup", "0 1 * * 3,6", 90.0, ["a10-*"])
    ]
    reason = f"{path}:2: 5 fields where the header names 4: a cron expression with a list (days 3,6) must be quoted"
    assert reason in result.stderr and '"0 14 * * 3,6"' in result.stderr


def test_runs_that_overlap_are_one_window():
    """Issue 14, item 4: `* * * * *` for five minutes is one long window, not a run per minute held in memory
    (with a year-1-to-9999 data range it was 3.4 GB before the expansion was refused)."""
    from oomlab.parse.calendar import JobRule, expand

    windows = list(expand(JobRule(2, "burn", "* * * * *", 5.0, None), datetime(2026, 11, 1), datetime(2026, 11, 8)))
    assert [(w.start, w.end) for w in windows] == [(datetime(2026, 10, 31, 23, 56), datetime(2026, 11, 8, 0, 5))]
    daily = list(expand(JobRule(3, "backup", "0 1 * * *", 90.0, None), datetime(2026, 11, 1), datetime(2026, 11, 8)))
    assert len(daily) == 7 and all(w.end - w.start == timedelta(minutes=90) for w in daily)
