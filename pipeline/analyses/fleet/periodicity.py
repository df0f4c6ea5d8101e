"""When OOMs cluster in time: hours of day and days of week above their traffic, and recurring windows.

The expectation is traffic-weighted and taken per instance: an instance's OOMs are spread over hours in
proportion to its traffic there (`fct_traffic_exposure`: its requests, or the fleet's traffic profile for
instances known only from text logs), and the expectations are summed. Observed counts are tested
against them (Poisson upper tail, Holm over the family). Recurring windows are runs of significant
hour x instance cells whose OOMs reach MIN_RATIO x the instance's usual rate on most days; the windows
of scheduled jobs found causal on the hosts they affect, and the minutes of OOMs a neighbour process explains
(`jobs.neighbour_ooms`), are removed first, so a window a calendar or a neighbour explains is not reported
twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import duckdb
import polars as pl

from ...load.sql import sql_text
from ..window import utc_naive
from . import jobs
from .rate_tests import holm, poisson_excess_p

ALPHA = jobs.ALPHA
MIN_RATIO = jobs.MIN_LIFT
MIN_OOMS = jobs.MIN_OOMS_INSIDE
# The fleet tables flag an hour or day only when it is also this much above expectation: with millions of
# requests a 10 % wobble (e.g. time-driven leak OOMs on quiet weekends) is significant but not a pattern.
FLEET_MIN_RATIO = 1.25
# A window recurs when at least this share of the days show its excess (see `_recurrence`): a daily cause
# does, a one-day burst does not.
MIN_RECURRENCE = 0.5


def minutes(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    explained: Iterable[tuple[str, str]] = (),
    neighbours: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per-minute traffic and OOMs with day and hour, minus the windows of `explained` (job, host) pairs and
    the minutes of `neighbours` (`instance`, `minute`: OOMs a neighbour process explains)."""
    params: dict[str, object] = {"since": utc_naive(since), "until": utc_naive(until)}
    frame = con.sql(sql_text("q_periodicity_minutes"), params=params).pl()
    if neighbours is not None and not neighbours.is_empty():
        frame = frame.join(neighbours.select("instance", "minute").unique(), on=["instance", "minute"], how="anti")
    pairs = pl.DataFrame(list(explained), schema={"name": pl.Utf8, "instance": pl.Utf8}, orient="row")
    if not pairs.is_empty():
        params["names"] = pairs["name"].unique().to_list()
        inside = con.sql(sql_text("q_periodicity_explained"), params=params).pl()
        inside = inside.join(pairs, on=["name", "instance"])
        inside = inside.select("instance", "minute").unique()
        frame = frame.join(inside, on=["instance", "minute"], how="anti")
    return frame.with_columns(
        day=pl.col("minute").dt.truncate("1d"),
        hour_of_day=pl.col("minute").dt.hour().cast(pl.Int64),
        day_of_week=pl.col("minute").dt.weekday().cast(pl.Int64),
    )


def _with_expected(cells: pl.DataFrame) -> pl.DataFrame:
    """Add `expected`: each instance's OOMs spread over its cells in proportion to their exposure."""
    totals = pl.col("ooms").sum().over("instance"), pl.col("exposure").sum().over("instance")
    expected = pl.when(totals[1] > 0).then(totals[0] * pl.col("exposure") / totals[1]).otherwise(0.0)
    return cells.with_columns(expected=expected)


def _tested(table: pl.DataFrame) -> pl.DataFrame:
    """Add `ratio`, `p_value` (OOMs this high under the expectation) and Holm's `p_adjusted`."""
    p_values = [poisson_excess_p(o, e) for o, e in zip(table["ooms"], table["expected"], strict=True)]
    ratio = pl.when(pl.col("expected") > 0).then(pl.col("ooms") / pl.col("expected"))
    return table.with_columns(
        ratio=ratio,
        p_value=pl.Series(p_values, dtype=pl.Float64),
        p_adjusted=pl.Series(holm(p_values), dtype=pl.Float64),
    )


def _fleet_profile(frame: pl.DataFrame, key: str) -> pl.DataFrame:
    """Fleet table by one time key: observed against the summed per-instance expectations."""
    cells = _with_expected(_cells(frame, ["instance", key]))
    table = (
        cells.group_by(key)
        .agg(
            pl.col("requests").sum(),
            pl.col("ooms").sum(),
            pl.col("expected").sum(),
            pl.col("ooms").filter(pl.col("traffic_source") == "requests").sum().alias("ooms_with_traffic"),
        )
        .sort(key)
    )
    rate = pl.when(pl.col("requests") > 0).then(1000.0 * pl.col("ooms_with_traffic") / pl.col("requests"))
    table = _tested(table.with_columns(oom_rate_per_1k=rate))
    flagged = (pl.col("p_adjusted") < ALPHA) & (pl.col("ratio") >= FLEET_MIN_RATIO)
    return table.with_columns(significant=flagged.fill_null(False))


def _cells(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Requests, OOMs and exposure summed over `keys`."""
    return frame.group_by(keys).agg(
        pl.col("requests").sum(), pl.col("ooms").sum(), pl.col("exposure").sum(), pl.col("traffic_source").first()
    )


def hour_of_day(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """One row per hour of day (UTC) across the fleet, tested against its traffic.

    Columns: `hour_of_day`, `requests`, `ooms` (all OOM events), `expected` (OOMs if every instance's OOMs
    followed its traffic), `ooms_with_traffic`, `oom_rate_per_1k`, `ratio` (ooms / expected), `p_value`,
    `p_adjusted` (Holm over the 24 hours), `significant` (p_adjusted < ALPHA and ratio >= FLEET_MIN_RATIO).
    """
    return _fleet_profile(minutes(con, since, until), "hour_of_day")


def day_of_week(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """As `hour_of_day`, by ISO day of week (`day_of_week` 1 = Monday .. 7 = Sunday; Holm over 7)."""
    return _fleet_profile(minutes(con, since, until), "day_of_week")


def host_hours(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    explained: Iterable[tuple[str, str]] = (),
    neighbours: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per instance x hour of day, tested against the instance's own traffic in that hour.

    Columns: `instance`, `hour_of_day`, `traffic_source`, `requests`, `ooms`, `exposure`, `expected`,
    `ratio`, `p_value`, `p_adjusted` (Holm over all cells), `significant` (adjusted p < ALPHA, ratio >=
    MIN_RATIO and at least MIN_OOMS OOMs). `explained` (job, host) pairs have their windows removed, and
    `neighbours` (`jobs.neighbour_ooms`) their minutes.
    """
    return _host_cells(minutes(con, since, until, explained, neighbours))


def _host_cells(frame: pl.DataFrame) -> pl.DataFrame:
    """Instance x hour cells of instances with any OOM, tested (see `host_hours`)."""
    cells = _with_expected(_cells(frame, ["instance", "hour_of_day"]))
    cells = cells.filter(pl.col("ooms").sum().over("instance") > 0).sort(["instance", "hour_of_day"])
    cells = _tested(cells)
    significant = (pl.col("p_adjusted") < ALPHA) & (pl.col("ratio") >= MIN_RATIO) & (pl.col("ooms") >= MIN_OOMS)
    return cells.with_columns(significant=significant.fill_null(False))


def explained_pairs(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[tuple[str, str]]:
    """(job, host) pairs whose windows a scheduled job found causal explains: the hosts it affects."""
    effects = jobs.job_effects(con, since, until).filter(pl.col("verdict") == "reported")
    return [(row["name"], host) for row in effects.to_dicts() for host in row["hosts_affected"]]


def periodic_windows(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    explained: Iterable[tuple[str, str]] | None = None,
    neighbours: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Runs of significant hours per instance, with how often they recur; none explained by a job or a neighbour.

    With `explained` None, the windows of scheduled jobs found causal on the hosts they affect and the minutes
    of OOMs a neighbour process explains (`jobs.neighbour_ooms`) are removed; given `explained` pairs, only
    their windows and the minutes of `neighbours` if given; pass () to use the data alone.
    Columns: `instance`, `start_hour`, `end_hour` (exclusive, may wrap past midnight), `window_utc`
    ("HH:00-HH:00"), `ooms`, `expected`, `ratio`, `p_value` (Poisson, the run's total), `excess_ooms`
    (OOMs beyond what the instance's rate outside the window predicts for its traffic inside), `days`,
    `days_above` (days whose OOMs in the window reach MIN_RATIO x the instance's rate outside it),
    `recurrence` (days_above / days),
    `recurring` (recurrence >= MIN_RECURRENCE).
    """
    pairs = explained_pairs(con, since, until) if explained is None else list(explained)
    if explained is None and neighbours is None:
        neighbours = jobs.neighbour_ooms(con, since, until)
    frame = minutes(con, since, until, pairs, neighbours)
    cells = _host_cells(frame)
    rows = [_window_row(frame, cells, instance, hours) for instance, hours in _significant_runs(cells)]
    return pl.DataFrame(rows, schema=_WINDOW_SCHEMA)


_WINDOW_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "instance": pl.Utf8,
    "start_hour": pl.Int64,
    "end_hour": pl.Int64,
    "window_utc": pl.Utf8,
    "ooms": pl.Int64,
    "expected": pl.Float64,
    "ratio": pl.Float64,
    "p_value": pl.Float64,
    "excess_ooms": pl.Float64,
    "days": pl.Int64,
    "days_above": pl.Int64,
    "recurrence": pl.Float64,
    "recurring": pl.Boolean,
}


def _significant_runs(cells: pl.DataFrame) -> list[tuple[str, list[int]]]:
    """Per instance, maximal runs of consecutive significant hours (23 and 0 are neighbours)."""
    runs: list[tuple[str, list[int]]] = []
    for (instance,), group in cells.filter(pl.col("significant")).group_by(["instance"], maintain_order=True):
        runs.extend((str(instance), run) for run in circular_runs(sorted(group["hour_of_day"].to_list())))
    return runs


def circular_runs(hours: list[int]) -> list[list[int]]:
    """Sorted distinct hours split into runs of consecutive hours, a run over midnight joined up."""
    runs: list[list[int]] = []
    for hour in hours:
        if runs and hour == runs[-1][-1] + 1:
            runs[-1].append(hour)
        else:
            runs.append([hour])
    if len(runs) > 1 and runs[0][0] == 0 and runs[-1][-1] == 23:
        runs[0] = runs.pop() + runs[0]
    return runs


def _window_row(frame: pl.DataFrame, cells: pl.DataFrame, instance: str, hours: list[int]) -> dict:
    """Totals, test and day-by-day recurrence of one instance's run of hours."""
    theirs = cells.filter(pl.col("instance") == instance)
    inside = pl.col("hour_of_day").is_in(hours)
    mine, rest = theirs.filter(inside), theirs.filter(~inside)
    ooms, expected = int(mine["ooms"].sum()), float(mine["expected"].sum())
    rest_exposure = float(rest["exposure"].sum())
    baseline = float(rest["ooms"].sum()) / rest_exposure if rest_exposure > 0 else 0.0
    days, above = _recurrence(frame.filter(pl.col("instance") == instance), hours, baseline)
    excess = ooms - baseline * float(mine["exposure"].sum())
    start, end = hours[0], (hours[-1] + 1) % 24
    recurrence = above / days if days else 0.0
    return {
        "instance": instance,
        "start_hour": start,
        "end_hour": end,
        "window_utc": f"{start:02d}:00-{end:02d}:00",
        "ooms": ooms,
        "expected": expected,
        "ratio": ooms / expected if expected > 0 else None,
        "p_value": poisson_excess_p(ooms, expected),
        "excess_ooms": excess,
        "days": days,
        "days_above": above,
        "recurrence": recurrence,
        "recurring": days > 0 and recurrence >= MIN_RECURRENCE,
    }


def _recurrence(frame: pl.DataFrame, hours: list[int], baseline: float) -> tuple[int, int]:
    """Days with traffic in the window, and the days that show the excess.

    A day shows it when its OOMs in the window reach MIN_RATIO times what the instance's rate outside the
    window predicts for that day's traffic there, and at least one: a one-day burst is one such day, a
    daily cause is most of them.
    """
    daily = (
        frame.filter(pl.col("hour_of_day").is_in(hours))
        .group_by("day")
        .agg(pl.col("ooms").sum(), pl.col("exposure").sum())
        .filter(pl.col("exposure") > 0)
    )
    threshold = pl.max_horizontal(pl.lit(1.0), MIN_RATIO * baseline * pl.col("exposure"))
    return daily.height, daily.filter(pl.col("ooms") >= threshold).height
