"""Shared results: inside one findings or report run, agg_water_hours (window functions over every request, so no
query's filter reaches into it) is computed once into a temporary table that shadows the view, and dropped when
the run ends; the analyses read the same rows either way."""

from __future__ import annotations

import duckdb
from polars.testing import assert_frame_equal

from oomlab.analyses.fleet import forecast, sizing, water_levels
from oomlab.analyses.shared import materialized, shared_results
from oomlab.findings.collect import collect_findings


def _temp_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()]


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
    water_levels.water_levels(fleet_con)
    assert _temp_tables(fleet_con) == []


def test_the_analyses_read_the_same_rows_from_the_table_as_from_the_view(fleet_con) -> None:
    levels, hourly, peaks = (
        water_levels.water_levels(fleet_con),
        forecast.hourly_levels(fleet_con),
        sizing.daily_peaks(fleet_con),
    )
    with shared_results():
        materialized(fleet_con, "agg_water_hours")
        assert _temp_tables(fleet_con) == ["agg_water_hours"]
        assert_frame_equal(water_levels.water_levels(fleet_con), levels)
        assert_frame_equal(forecast.hourly_levels(fleet_con), hourly)
        assert_frame_equal(sizing.daily_peaks(fleet_con), peaks)


def test_findings_are_the_same_with_the_table(fleet_con, monkeypatch) -> None:
    """collect_findings runs in a block of its own (the table); with materializing turned off every query computes
    the view: the findings are the same."""
    with_table = collect_findings(fleet_con)
    monkeypatch.setattr(water_levels, "materialized", lambda con, view: None)
    per_query = collect_findings(fleet_con)
    assert _temp_tables(fleet_con) == []

    def key(found: list) -> list[tuple]:
        return [(f.kind, f.subject, f.confidence, round(f.impact, 6)) for f in found]

    assert len(with_table) > 3 and key(with_table) == key(per_query)
