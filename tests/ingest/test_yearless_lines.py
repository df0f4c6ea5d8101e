"""A line that states no year (vLLM's `ERROR 07-07 15:19:48`, syslog's `Nov 30 01:49:09`) takes its year from the
log's own evidence: --at, else the log's dated lines; where nothing says, the latest year that is not in the
future, and `sources.note` says the year was guessed (issue 38). The log is real: a vLLM V1 worker's OOM pasted
into an issue (tests/cases/realworld/pasted_text/029, its URL in case.json), every line year-less."""

from __future__ import annotations

from datetime import datetime

from corpus import ROOT

(LOG,) = (ROOT / "pasted_text").glob("029_*/artifact.*")


def test_a_guessed_year_is_said_in_sources(db, run_cli, sql) -> None:
    assert run_cli("ingest", LOG, "--db", db, "--quiet").exit_code == 0
    ((ts,),) = sql("SELECT ts FROM oom_events")
    assert (ts.month, ts.day, ts.hour, ts.minute) == (7, 7, 15, 19) and ts <= datetime.now()
    assert sql("SELECT note FROM sources") == [
        (f"lines without a year read as {ts.year}: nothing in the log says which (pass --at to place them)",)
    ]


def test_at_gives_the_year_and_nothing_is_guessed(db, run_cli, sql) -> None:
    assert run_cli("ingest", LOG, "--db", db, "--at", "2025-07-08T00:00", "--quiet").exit_code == 0
    assert sql("SELECT ts FROM oom_events") == [(datetime(2025, 7, 7, 15, 19, 48),)]
    assert sql("SELECT note FROM sources") == [(None,)]


def test_a_dated_line_gives_the_year(tmp_path, db, run_cli, sql) -> None:
    """The same lines after a line of the job's own log that states its date: the log's year, not a guess."""
    log = tmp_path / "job.log"
    log.write_text("2024-07-07 15:10:02 job started\n" + LOG.read_text())
    assert run_cli("ingest", log, "--db", db, "--quiet").exit_code == 0
    assert sql("SELECT ts FROM oom_events") == [(datetime(2024, 7, 7, 15, 19, 48),)]
    assert sql("SELECT note FROM sources") == [(None,)]
