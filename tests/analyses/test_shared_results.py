"""Shared results: inside one findings or report run, the aggregates that queries read whole (window functions over
every request, or a device's whole history: no query's filter reaches into them) are computed once into temporary
tables that shadow the views, and dropped when the run ends; the analyses read the same rows either way."""

from __future__ import annotations

import duckdb
from polars.testing import assert_frame_equal

from oomlab.analyses.fleet import forecast, sizing, water_levels, whole_history
from oomlab.analyses.shared import materialized, shared_results
from oomlab.findings.collect import collect_findings


def _temp_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return sorted(r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall())


def test_water_hours_are_computed_once_per_block_and_dropped_after(fleet_con) -> None:
    assert _temp_tables(fleet_con) == []
    with shared_results():
        water_levels.water_levels(fleet_con)
        assert _temp_tables(fleet_con) == ["agg_water_hours"]
        kept = fleet_con.execute("SELECT count(*) FROM temp.agg_water_hours").fetchall()[0][0]
        forecast.hourly_levels(fleet_con)
        sizing.daily_peaks(fleet_con)
        assert _temp_tables(fleet_con) == ["agg_water_hours"]  # not made again
    assert _temp_tables(fleet_con) == []
    assert kept == fleet_con.execute("SELECT count(*) FROM agg_water_hours").fetchall()[0][0] > 0


def test_outside_a_block_nothing_is_materialized(fleet_con) -> None:
    materialized(fleet_con, "agg_water_hours")
    whole_history.whole_history_once(fleet_con)
    water_levels.water_levels(fleet_con)
    assert _temp_tables(fleet_con) == []


def test_the_analyses_read_the_same_rows_from_the_tables_as_from_the_views(fleet_con) -> None:
    levels, hourly, peaks = (
        water_levels.water_levels(fleet_con),
        forecast.hourly_levels(fleet_con),
        sizing.daily_peaks(fleet_con),
    )
    instances = fleet_con.sql("SELECT * FROM fct_instances ORDER BY ALL").pl()
    with shared_results():
        whole_history.whole_history_once(fleet_con)
        assert _temp_tables(fleet_con) == ["agg_request_devices", "agg_water_hours"]
        assert_frame_equal(water_levels.water_levels(fleet_con), levels)
        assert_frame_equal(forecast.hourly_levels(fleet_con), hourly)
        assert_frame_equal(sizing.daily_peaks(fleet_con), peaks)
        assert_frame_equal(fleet_con.sql("SELECT * FROM fct_instances ORDER BY ALL").pl(), instances)


def test_findings_are_the_same_with_the_tables(fleet_con, monkeypatch) -> None:
    """collect_findings runs in a block of its own (the tables); with materializing turned off every query computes
    the views: the findings are the same."""
    with_tables = collect_findings(fleet_con)
    monkeypatch.setattr(whole_history, "materialized", lambda con, view: None)
    per_query = collect_findings(fleet_con)
    assert _temp_tables(fleet_con) == []

    def key(found: list) -> list[tuple]:
        return [(f.kind, f.subject, f.confidence, round(f.impact, 6)) for f in found]

    assert len(with_tables) > 3 and key(with_tables) == key(per_query)
