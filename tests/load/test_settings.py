"""The constants SQL and Python share are defined once (sql/macros/oomlab_settings.sql): Python reads the
same values under the same names, and the alert levels drive the analyses, the report bands and the SQL."""

from __future__ import annotations

import inspect
import re
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from oomlab.analyses.fleet import aggregates, alert_rules
from oomlab.errors import DatabaseError
from oomlab.load import settings
from oomlab.load.sql import sql_text
from oomlab.load.tables import connect
from oomlab.report import figures

TEXT = sql_text("oomlab_settings")
NAMES = re.findall(r"^CREATE OR REPLACE MACRO (\w+)\(\)", TEXT, re.MULTILINE)


def _python(value: object) -> object:
    """A value DuckDB returns as Python reads it from the file: decimals as floats, lists as tuples."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, list):
        return tuple(_python(v) for v in value)
    return value


def test_every_setting_has_one_python_name_of_the_same_name() -> None:
    public = {name for name in vars(settings) if name.isupper() and not name.startswith("_")}
    assert NAMES and len(NAMES) == len(set(NAMES))
    assert public == set(NAMES) == set(settings.read_settings())


@pytest.mark.parametrize("name", NAMES)
def test_duckdb_and_python_agree_on_each_setting(name: str) -> None:
    con = duckdb.connect()
    con.execute(TEXT)
    # the name comes from the settings file itself, not from input
    (value,) = con.execute(f"SELECT {name}()").fetchone()  # type: ignore[misc]
    assert _python(value) == getattr(settings, name)
    assert type(_python(value)) is type(getattr(settings, name))


def test_each_setting_says_why_it_has_its_value() -> None:
    lines = TEXT.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("CREATE OR REPLACE MACRO") and not lines[i - 1].startswith("CREATE"):
            assert lines[i - 1].startswith("--"), f"no comment above {line}"


def test_a_value_the_settings_may_not_hold_is_refused() -> None:
    assert settings._literal("INTERVAL 6 HOUR").total_seconds() == 6 * 3600
    assert settings._literal("[0.70, 0.85]::DOUBLE[]") == (0.7, 0.85)
    with pytest.raises(DatabaseError, match="not a literal"):
        settings._literal("0.75 * 2")


def test_the_alert_levels_have_one_definition() -> None:
    levels = settings.ALERT_LEVELS
    assert levels == (0.70, 0.85, 0.95)
    assert alert_rules.ALERT_LEVELS is levels
    assert [low for low, _high, _color in figures.LEVEL_BANDS] == list(levels)
    assert [high for _low, high, _color in figures.LEVEL_BANDS] == [*levels[1:], 1.0]
    # the water-level queries read the levels from SQL; their columns are named after them
    for query in ("q_water_levels", "q_water_telemetry"):
        text = sql_text(query)
        assert "$level" not in text
        for level in levels:
            assert f"hours_above_{round(level * 100)}" in text


def test_weekly_periods_start_where_the_weekly_view_starts_them() -> None:
    assert inspect.signature(aggregates.periods).parameters["origin"].default is settings.WEEK_ORIGIN
    assert settings.WEEK_ORIGIN.isoweekday() == 1  # a Monday
    assert "WEEK_ORIGIN()" in sql_text("rpt_oom_rate_weekly")


def test_the_views_apply_the_settings(db: Path) -> None:
    con = connect(db)
    try:
        sql = {name: text for name, text in con.execute("SELECT view_name, sql FROM duckdb_views()").fetchall()}
        assert "RESTART_RETURN_SHARE()" in sql["fct_request_baselines"].upper()
        assert con.execute("SELECT ALERT_LEVELS()[3], WEEK_ORIGIN()").fetchone() == (0.95, settings.WEEK_ORIGIN)
    finally:
        con.close()
