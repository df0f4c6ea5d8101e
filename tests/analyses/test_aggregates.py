"""OOM counts and rates: the sample fleet's counts as truths.json and its files state them, the real H200
logs' rates as their files say, and the cuts and weeks adding up."""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections import Counter
from datetime import datetime, timedelta

import duckdb
import polars as pl
import pytest

from oomlab.analyses.fleet.aggregates import DIMENSIONS, oom_rates, periods, rates_week_over_week, week_over_week
from oomlab.errors import DatabaseError
from oomlab.load.sql import apply_schema

from conftest import FLEET, H200, read_jsonl_gz

TRUTHS = json.loads((FLEET / "truths.json").read_text())
FLEET_INSTANCES = {i["name"] for i in TRUTHS["instances"]}


@pytest.fixture(scope="module")
def fleet_requests() -> pl.DataFrame:
    """instance, model_version, status and ts of every request in the fleet's request logs, read directly."""
    frames = [
        pl.read_ndjson(io.BytesIO(gzip.decompress(p.read_bytes())), infer_schema_length=None).select(
            "ts", "instance", "model_version", "status"
        )
        for p in sorted((FLEET / "requests").glob("*.jsonl.gz"))
    ]
    utc = pl.col("ts").str.to_datetime(time_zone="UTC").dt.replace_time_zone(None)
    return pl.concat(frames).with_columns(utc)


@pytest.fixture(scope="module")
def oom_times() -> list[datetime]:
    """The time of every OOM in the database: each planted one of the fleet (request and text logs, from
    oom_causes.csv.gz) and each of the real H200 request logs (fleet_db holds both; the captures fall in the
    fleet's last week)."""
    with gzip.open(FLEET / "oom_causes.csv.gz", "rt") as handle:
        planted = [r["ts"] for r in csv.DictReader(handle)]
    real = [r["ts"] for p in sorted(H200.glob("*/requests.jsonl.gz")) for r in read_jsonl_gz(p) if r["status"] == "oom"]
    return [datetime.fromisoformat(ts.replace("Z", "+00:00")).replace(tzinfo=None) for ts in planted + real]


def _by_key(frame: pl.DataFrame) -> dict:
    return {row["key"]: row for row in frame.to_dicts()}


def test_requests_and_ooms_per_instance_equal_truths(fleet_con) -> None:
    rows = _by_key(oom_rates(fleet_con, "instance"))
    for truth in TRUTHS["instances"]:
        row = rows.get(truth["name"])
        if truth["log"] == "requests":
            assert (row["requests"], row["ooms"]) == (truth["requests"], truth["ooms"])
            assert row["oom_rate_per_1k"] == pytest.approx(1000 * truth["ooms"] / truth["requests"])
        elif truth["ooms"]:  # a10-06: text log only -> its OOMs, no counted traffic, no rate
            assert (row["requests"], row["ooms"], row["ooms_with_traffic"]) == (0, truth["ooms"], 0)
            assert row["oom_rate_per_1k"] is None
        else:  # a100-06: a text log without OOMs leaves nothing to count
            assert row is None
    fleet = [r for k, r in rows.items() if k in FLEET_INSTANCES]
    assert sum(r["requests"] for r in fleet) == TRUTHS["counts"]["requests"]
    assert sum(r["ooms"] for r in fleet) == TRUTHS["counts"]["oom_events"]


def _text_log_failures() -> Counter:
    """The model each failing request of the fleet's text logs names on the line it logged before its traceback
    (`a10-06-0000039 failed status=500 model=assist-1.8b-v1.4 batch=4 ...`), read directly."""
    found: Counter = Counter()
    for path in sorted((FLEET / "textlogs").glob("*.log.gz")):
        for line in gzip.decompress(path.read_bytes()).decode().splitlines():
            if " failed status=" in line:
                found[line.split(" model=")[1].split()[0]] += 1
    return found


def test_requests_and_ooms_per_model_version_equal_the_files(fleet_con, fleet_requests) -> None:
    rows = _by_key(oom_rates(fleet_con, "model_version"))
    expected = fleet_requests.group_by("model_version").agg(
        pl.len().alias("requests"), (pl.col("status") == "oom").sum().alias("ooms")
    )
    assert expected.height == 3
    # a text log's OOMs count under the version their request line names; its requests carry no memory levels
    # and are no traffic of the request logs, so the rates' request counts are the request logs' alone
    texts = _text_log_failures()
    assert sum(texts.values()) == TRUTHS["counts"]["ooms_text_logs"]
    for version, requests, ooms in expected.iter_rows():
        assert (rows[version]["requests"], rows[version]["ooms"]) == (requests, ooms + texts[version])
    assert None not in rows  # every OOM named its version


@pytest.mark.parametrize(
    "scenario, instance, requests, ooms",
    [
        ("serve_mixed", "gpu-b-1", 101, 4),
        ("serve_leak", "gpu-a-0", 47, 3),
        ("cache_bloat", "gpu-c-2", 400, 0),
        ("big_trace_cpp", "gpu-d-3", 5, 0),
    ],
)
def test_real_h200_rates_are_what_their_files_say(fleet_con, scenario, instance, requests, ooms) -> None:
    records = read_jsonl_gz(H200 / scenario / "requests.jsonl.gz")
    assert (len(records), sum(r["status"] == "oom" for r in records)) == (requests, ooms)
    row = _by_key(oom_rates(fleet_con, "instance"))[instance]
    assert (row["requests"], row["ooms"]) == (requests, ooms)
    assert row["oom_rate_per_1k"] == pytest.approx(1000 * ooms / requests)


def test_serve_mixed_is_39_6_per_thousand(fleet_con) -> None:
    assert round(_by_key(oom_rates(fleet_con, "instance"))["gpu-b-1"]["oom_rate_per_1k"], 1) == 39.6


@pytest.mark.parametrize("by", DIMENSIONS)
def test_every_cut_adds_up_to_the_totals(fleet_con, by) -> None:
    table = oom_rates(fleet_con, by)
    assert table["requests"].sum() == TRUTHS["counts"]["requests"] + 553  # + the real H200 requests
    assert table["ooms"].sum() == TRUTHS["counts"]["oom_events"] + 7
    assert table["key"].n_unique() == table.height


def test_the_all_time_view_matches_the_function(fleet_con) -> None:
    view = fleet_con.sql(
        "SELECT * EXCLUDE (dimension) FROM rpt_oom_rate_by_dimension WHERE dimension = 'batch_tokens'"
    ).pl()
    assert view.equals(oom_rates(fleet_con, "batch_tokens"))


def test_the_weekly_view_matches_iso_week_periods(fleet_con) -> None:
    view = fleet_con.sql("SELECT * FROM rpt_oom_rate_weekly").pl()
    table = periods(fleet_con)
    assert view["week_start"].to_list() == table["period_start"].to_list()
    for column in ("requests", "ooms", "ooms_with_traffic", "instances_affected", "requests_lost"):
        assert view[column].to_list() == table[column].to_list(), column


def test_hours_and_weekdays_are_labelled_and_ordered(fleet_con) -> None:
    hours = oom_rates(fleet_con, "hour_of_day")
    assert hours["key"].to_list() == [f"{h:02d}:00" for h in range(24)]
    days = oom_rates(fleet_con, "day_of_week")
    assert days["key"].to_list() == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert days["key_order"].to_list() == list(range(1, 8))


def test_batch_tokens_buckets_show_the_a10_threshold(fleet_con) -> None:
    rows = _by_key(oom_rates(fleet_con, "batch_tokens"))
    # N = 46,646 tokens lies in 32768-65535: most OOMs and the highest rate; small prompts never fail
    assert rows["32768-65535"]["ooms"] > 0.6 * TRUTHS["counts"]["ooms_request_logs"]
    assert rows["32768-65535"]["oom_rate_per_1k"] > 10 * rows["16384-32767"]["oom_rate_per_1k"]
    assert all(rows[k]["ooms"] == 0 for k in ("64-127", "128-255", "256-511", "512-1023", "1024-2047"))


def test_time_range_is_half_open(fleet_con, fleet_requests) -> None:
    since, until = datetime(2026, 11, 23), datetime(2026, 11, 30)
    table = oom_rates(fleet_con, "instance", since, until)
    expected = fleet_requests.filter((pl.col("ts") >= since) & (pl.col("ts") < until))
    assert table.filter(pl.col("key").is_in(list(FLEET_INSTANCES)))["requests"].sum() == expected.height


def test_unknown_dimension_names_the_choices(fleet_con) -> None:
    with pytest.raises(DatabaseError, match="cannot cut OOM rates by 'gpu'"):
        oom_rates(fleet_con, "gpu")


def test_weeks_match_the_planted_oom_times(fleet_con, oom_times) -> None:
    weeks = periods(fleet_con, until=datetime(2026, 12, 7))
    assert weeks["period_start"].to_list() == [datetime(2026, 11, 16), datetime(2026, 11, 23), datetime(2026, 11, 30)]
    expected = Counter((t - datetime(2026, 11, 16)).days // 7 for t in oom_times)
    assert weeks["ooms"].to_list() == [expected[0], expected[1], expected[2]]
    assert weeks["requests"].sum() == TRUTHS["counts"]["requests"] + 553  # + the real H200 requests


def test_week_over_week(fleet_con, fleet_requests, oom_times) -> None:
    now = datetime(2026, 12, 7)
    table = {r["metric"]: r for r in week_over_week(fleet_con, now).to_dicts()}
    last = [t for t in oom_times if now - timedelta(days=14) <= t < now - timedelta(days=7)]
    this = [t for t in oom_times if now - timedelta(days=7) <= t < now]
    assert (table["ooms"]["last_week"], table["ooms"]["this_week"]) == (len(last), len(this))
    assert table["ooms"]["change"] == len(this) - len(last)
    assert table["ooms"]["change_pct"] == pytest.approx(100 * (len(this) - len(last)) / len(last))
    this_requests = fleet_requests.filter(pl.col("ts") >= now - timedelta(days=7))
    real = [r for p in sorted(H200.glob("*/requests.jsonl.gz")) for r in read_jsonl_gz(p)]  # all on 2026-11-30
    assert table["requests"]["this_week"] == this_requests.height + len(real)
    # a10-01..05, a10-06 (text log) and a100-05 fail every week; the other A100s never do; and the captures' own
    assert table["instances_affected"]["this_week"] == 7 + len({r["instance"] for r in real if r["status"] == "oom"})
    assert table["requests_lost"]["this_week"] >= table["ooms"]["this_week"]


def test_rates_week_over_week_by_instance(fleet_con) -> None:
    table = rates_week_over_week(fleet_con, "instance", datetime(2026, 12, 7))
    whole = week_over_week(fleet_con, datetime(2026, 12, 7)).row(1, named=True)
    assert (table["ooms_last"].sum(), table["ooms_this"].sum()) == (whole["last_week"], whole["this_week"])
    a10_06 = table.filter(pl.col("key") == "a10-06").row(0, named=True)
    assert a10_06["requests_this"] == 0 and a10_06["oom_rate_per_1k_this"] is None


def test_empty_database_gives_empty_tables() -> None:
    con = duckdb.connect()
    apply_schema(con)
    assert oom_rates(con, "instance").is_empty()
    assert week_over_week(con).is_empty()
