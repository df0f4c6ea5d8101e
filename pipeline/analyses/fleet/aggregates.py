"""OOM counts and OOM rates per 1,000 requests, cut by instance, version, time and prompt size, and by week.

Counting rules (the views `fct_traffic_events` / `fct_traffic_dimensions` apply them):
- requests are rows of `requests`, whatever their status (an OOM'd request is a request), counted per minute by
  the aggregate tier (agg_request_minutes, agg_request_buckets), so a bound inside a minute counts that minute's
  requests by its start;
- OOMs are rows of `oom_events` with a time, from request logs and text logs (`snapshot` OOMs are left
  out: a snapshot is taken at a failure that is normally logged as well);
- a rate counts only OOMs of instances that have a request log (`ooms_with_traffic`), over their
  requests. Instances known only from text logs (no request rows) appear with their OOMs, 0 requests and
  a null rate: their traffic is not in the database, and guessing it would make every rate a guess.
Time ranges are half-open, `since <= ts < until`, in UTC; None leaves that end open.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import duckdb
import polars as pl

from ...errors import DatabaseError
from ...load.settings import WEEK_ORIGIN
from ...load.sql import sql_text
from ..window import utc_naive

# What `oom_rates` can cut by; prompt features are power-of-two buckets "b-(2b-1)" named by their lower bound.
DIMENSIONS: tuple[str, ...] = (
    "instance",
    "model_version",
    "hour_of_day",
    "day_of_week",
    "input_length",
    "output_length",
    "batch_size",
    "batch_tokens",
)
WEEK = timedelta(days=7)

WOW_METRICS: tuple[str, ...] = ("requests", "ooms", "oom_rate_per_1k", "instances_affected", "requests_lost")


def oom_rates(
    con: duckdb.DuckDBPyConnection, by: str, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """OOMs and OOM rate per 1,000 requests by one of DIMENSIONS, in order of the key.

    Columns: `key` (instance, version, "HH:00", "Mon".."Sun", or bucket "b-(2b-1)"; null when the field was
    not recorded, e.g. text-log OOMs have no batch), `key_order` (hour, ISO weekday 1-7, bucket lower bound;
    null for names), `requests`, `ooms` (all OOM events), `ooms_with_traffic` (those of instances with a
    request log), `oom_rate_per_1k` (1000 x ooms_with_traffic / requests; null without requests).
    """
    if by not in DIMENSIONS:
        raise DatabaseError(f"cannot cut OOM rates by {by!r}", hint=f"use one of {', '.join(DIMENSIONS)}")
    params = {"by": by, "since": utc_naive(since), "until": utc_naive(until)}
    return con.sql(sql_text("q_oom_rates"), params=params).pl()


def periods(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    width: timedelta = WEEK,
    origin: datetime = WEEK_ORIGIN,  # a Monday: weekly buckets are ISO weeks
) -> pl.DataFrame:
    """Totals per period of `width` aligned on `origin` (default: ISO weeks from Monday 00:00 UTC).

    Columns: `period_start`, `period_end`, `requests`, `ooms`, `ooms_with_traffic`, `oom_rate_per_1k`,
    `instances_affected` (instances with at least one OOM), `requests_lost` (sequences in the failed
    batches: an OOM fails the whole batch; 1 when the batch size is unknown). Periods without any event
    are absent.
    """
    params = {"width": width, "origin": utc_naive(origin), "since": utc_naive(since), "until": utc_naive(until)}
    return con.sql(sql_text("q_oom_periods"), params=params).pl()


def latest_day_end(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """Midnight after the last request or OOM: the default end of a reporting week."""
    rows = con.sql("SELECT date_trunc('day', max(last_ts)) + INTERVAL 1 DAY FROM fct_traffic_events").fetchall()
    return rows[0][0]


def week_over_week(con: duckdb.DuckDBPyConnection, now: datetime | None = None) -> pl.DataFrame:
    """This week [now - 7 d, now) against last week [now - 14 d, now - 7 d), one row per metric.

    Columns: `metric` (one of WOW_METRICS, as in `periods`), `last_week`, `this_week`, `change`
    (this - last) and `change_pct` (change / last x 100; null when last is 0 or null).
    `now` defaults to midnight after the latest event.
    """
    end = utc_naive(now) or latest_day_end(con)
    if end is None:
        return pl.DataFrame(
            schema={
                "metric": pl.Utf8,
                "last_week": pl.Float64,
                "this_week": pl.Float64,
                "change": pl.Float64,
                "change_pct": pl.Float64,
            }
        )
    return period_over_period(con, end - WEEK, end)


def period_over_period(con: duckdb.DuckDBPyConnection, since: datetime, until: datetime) -> pl.DataFrame:
    """[since, until) against the period of the same length before it; columns as `week_over_week`
    (`last_week` is the period before, `this_week` the one asked for, whatever their length)."""
    since, until = utc_naive(since), utc_naive(until)
    width = until - since
    table = periods(con, since - width, until, width, since - width)
    return _compare(_period_row(table, since - width), _period_row(table, since))


def _period_row(table: pl.DataFrame, start: datetime) -> dict[str, float | None]:
    """The metrics of the period starting at `start`; zeros (and a null rate) when nothing happened."""
    rows = table.filter(pl.col("period_start") == start)
    if rows.is_empty():
        return {m: (None if m == "oom_rate_per_1k" else 0.0) for m in WOW_METRICS}
    row = rows.row(0, named=True)
    return {m: None if row[m] is None else float(row[m]) for m in WOW_METRICS}


def _compare(last: dict[str, float | None], this: dict[str, float | None]) -> pl.DataFrame:
    """One row per metric with its change."""
    rows = []
    for metric in WOW_METRICS:
        before, after = last[metric], this[metric]
        change = None if before is None or after is None else after - before
        pct = None if change is None or not before else 100.0 * change / before
        rows.append({"metric": metric, "last_week": before, "this_week": after, "change": change, "change_pct": pct})
    return pl.DataFrame(
        rows,
        schema={
            "metric": pl.Utf8,
            "last_week": pl.Float64,
            "this_week": pl.Float64,
            "change": pl.Float64,
            "change_pct": pl.Float64,
        },
    )


def rates_week_over_week(con: duckdb.DuckDBPyConnection, by: str, now: datetime | None = None) -> pl.DataFrame:
    """`oom_rates` by one dimension for last week and this week side by side (windows as `week_over_week`).

    Columns: `key`, `key_order`, `requests_last`, `ooms_last`, `oom_rate_per_1k_last`, `requests_this`,
    `ooms_this`, `oom_rate_per_1k_this`, `ooms_change` (this - last; a key absent in a week counts 0).
    """
    end = utc_naive(now) or latest_day_end(con) or datetime(1970, 1, 1)
    keep = ["key", "key_order", "requests", "ooms", "oom_rate_per_1k"]
    last = oom_rates(con, by, end - 2 * WEEK, end - WEEK).select(keep)
    this = oom_rates(con, by, end - WEEK, end).select(keep)
    both = last.join(this, on=["key", "key_order"], how="full", coalesce=True, suffix="_this", nulls_equal=True)
    both = both.rename({"requests": "requests_last", "ooms": "ooms_last", "oom_rate_per_1k": "oom_rate_per_1k_last"})
    counts = ["requests_last", "ooms_last", "requests_this", "ooms_this"]
    both = both.with_columns(pl.col(counts).fill_null(0))
    return both.with_columns((pl.col("ooms_this") - pl.col("ooms_last")).alias("ooms_change")).sort(
        ["key_order", "key"], nulls_last=True
    )
