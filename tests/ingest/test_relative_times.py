"""Request traces whose times count from their own start, or that state no time: `--at` places them.

Real cases (tests/cases/realworld/requests/): Vidur's per-request copy of Azure's 2023 conversation trace
(003: `arrived_at` in seconds from the trace's start) and the Azure trace itself (002: absolute TIMESTAMPs);
Mooncake's conversation trace (007: `timestamp` in milliseconds from its start, as its README says); LLMPerf's
per-request results (004: no time at all).
"""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta

import pytest

from oomlab.errors import UsageError
from oomlab.fields import FIELDS, column_unit, parse_map_options, with_mapping

from conftest import CASES

REQUESTS = CASES / "realworld" / "requests"
VIDUR = next(REQUESTS.glob("003_*")) / "artifact.csv"
AZURE = next(REQUESTS.glob("002_*")) / "artifact.csv"
MOONCAKE = next(REQUESTS.glob("007_*")) / "artifact.jsonl"
LLMPERF = next(REQUESTS.glob("004_*")) / "artifact.json"
# the Azure conversation trace's first TIMESTAMP (case 002), from which Vidur's arrived_at counts
AZURE_START = "2023-11-16T18:15:46.68059"


def _azure_times() -> list[datetime]:
    with AZURE.open(newline="") as handle:
        return [datetime.fromisoformat(row["TIMESTAMP"][:26]) for row in csv.DictReader(handle)]


def test_a_relative_trace_anchored_at_its_start_has_the_absolute_traces_times(run_cli, db, sql):
    """Vidur's trace, placed at the first time of the Azure trace it was made from, is that trace again: all 200
    times agree to the microsecond, row for row."""
    result = run_cli("ingest", VIDUR, "--db", db, "--map", "ts=arrived_at", "--at", AZURE_START, "-q")
    assert result.exit_code == 0, result.output
    times = [ts for (ts,) in sql("SELECT ts FROM requests ORDER BY line")]
    assert times == _azure_times() and len(times) == 200
    (note,) = sql("SELECT note FROM sources")[0]
    assert note == "200 times are from the log's start, read after --at 2023-11-16 18:15:46.680590 UTC"


def test_without_at_a_relative_time_is_a_reject_that_says_how_to_place_it(run_cli, db, sql):
    result = run_cli("ingest", VIDUR, "--db", db, "--map", "ts=arrived_at", "-q")
    assert result.exit_code == 0, result.output
    assert sql("SELECT count(*) FROM requests") == [(0,)]
    reasons = [reason for (reason,) in sql("SELECT reason FROM rejects ORDER BY line")]
    assert len(reasons) == 200
    assert reasons[1] == (
        "ts: 4.314579 is a time from the log's start (read in s; map another unit: --map ts=FIELD:ms), not a "
        "moment: pass --at with when it started"
    )


def test_the_unit_a_mapping_states_reads_milliseconds_from_the_start(run_cli, db, sql):
    """Mooncake's timestamps are milliseconds from the trace's start (its README): 15000 is 15 s, not 15000 s."""
    result = run_cli("ingest", MOONCAKE, "--db", db, "--map", "ts=timestamp:ms", "--at", "2026-03-02T09:00", "-q")
    assert result.exit_code == 0, result.output
    at = datetime(2026, 3, 2, 9)
    offsets = [json.loads(line)["timestamp"] for line in MOONCAKE.read_text().splitlines()]
    times = [ts for (ts,) in sql("SELECT ts FROM requests ORDER BY line")]
    assert times == [at + timedelta(milliseconds=ms) for ms in offsets]
    assert times[-1] == at + timedelta(seconds=15)


def test_times_written_as_text_are_placed_the_same_way(run_cli, db, sql, tmp_path):
    """Derived from Mooncake's trace: the same lines with each timestamp written as a string ("3000")."""
    derived = tmp_path / "mooncake_text_times.jsonl"
    lines = [json.loads(line) for line in MOONCAKE.read_text().splitlines()]
    derived.write_text("".join(json.dumps({**row, "timestamp": str(row["timestamp"])}) + "\n" for row in lines))
    result = run_cli("ingest", derived, "--db", db, "--map", "ts=timestamp:ms", "--at", "2026-03-02T09:00", "-q")
    assert result.exit_code == 0, result.output
    last = sql("SELECT ts FROM requests ORDER BY line DESC LIMIT 1")
    assert last == [(datetime(2026, 3, 2, 9, 0, 15),)] and sql("SELECT count(*) FROM requests") == [(60,)]


def test_absolute_epochs_are_moments_whatever_at_says(run_cli, db, sql, tmp_path):
    """Derived from Vidur's trace: each arrival written as epoch seconds (the Azure start plus arrived_at). An
    epoch is a moment with or without --at: the same times as the Azure trace."""
    start = datetime.fromisoformat(AZURE_START).timestamp() - datetime(1970, 1, 1).timestamp()
    derived = tmp_path / "vidur_epochs.csv"
    with VIDUR.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    derived.write_text(
        "arrived_at,num_prefill_tokens,num_decode_tokens\n"
        + "".join(
            f"{start + float(r['arrived_at']):.6f},{r['num_prefill_tokens']},{r['num_decode_tokens']}\n" for r in rows
        )
    )
    result = run_cli("ingest", derived, "--db", db, "--map", "ts=arrived_at", "--at", "2020-01-01T00:00", "-q")
    assert result.exit_code == 0, result.output
    assert [ts for (ts,) in sql("SELECT ts FROM requests ORDER BY line")] == _azure_times()
    assert sql("SELECT note FROM sources") == [(None,)]


def test_a_log_without_any_time_is_placed_at_at_and_says_so(run_cli, db, sql):
    maps = ["--map", "status=error_code", "--map", "error=error_msg", "--map", "latency_ms=end_to_end_latency_s:s"]
    result = run_cli("ingest", LLMPERF, "--db", db, *maps, "--at", "2024-01-10T12:00", "-q")
    assert result.exit_code == 0, result.output
    assert sql("SELECT count(*), min(ts), max(ts) FROM requests") == [
        (150, datetime(2024, 1, 10, 12), datetime(2024, 1, 10, 12))
    ]
    first = json.loads(LLMPERF.read_text())[0]
    (latency,) = sql("SELECT latency_ms FROM requests ORDER BY line LIMIT 1")[0]
    assert latency == pytest.approx(first["end_to_end_latency_s"] * 1000, rel=1e-12)
    assert sql("SELECT note FROM sources") == [
        ("the log states no time: its 150 rows are placed at --at 2024-01-10 12:00:00 UTC",)
    ]


def test_a_log_without_any_time_and_no_at_is_rejected_row_by_row(run_cli, db, sql):
    result = run_cli("ingest", LLMPERF, "--db", db, "-q")
    assert result.exit_code == 0, result.output
    assert sql("SELECT count(*) FROM requests") == [(0,)]
    assert sql("SELECT count(*), min(reason), max(reason) FROM rejects") == [
        (150, "missing timestamp", "missing timestamp")
    ]


def test_time_units_in_mappings():
    mapped = with_mapping(parse_map_options(("ts=timestamp:ms", "latency_ms=e2e_s:s", "allocated_after=mem:MiB")))
    by_name = {f.name: f for f in mapped}
    assert column_unit(by_name["ts"], "timestamp") == 1e3  # microseconds per millisecond
    assert column_unit(by_name["ts"], "other") == 0  # not stated: told by the numbers' size
    assert column_unit(by_name["latency_ms"], "e2e_s") == 1e3  # milliseconds per second
    assert column_unit(by_name["allocated_after"], "mem") == 1 << 20
    # a colon in a field that takes no unit is part of the name, as it always was
    assert parse_map_options(("model_version=svc:version",))["model_version"].column == "svc:version"
    with pytest.raises(UsageError, match="unknown time unit 'MiB'"):
        with_mapping(parse_map_options(("ts=timestamp:MiB",)), FIELDS)
    with pytest.raises(UsageError, match="unknown time unit 'GiB'"):
        parse_map_options(("latency_ms=e2e:GiB",))
