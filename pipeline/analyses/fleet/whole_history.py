"""The aggregates that queries read whole: no filter on a query's window reaches into them, so every query that
reads one computes it again over every request. Inside a shared-results block (analyses/shared.materialized) each
is computed once, into a temporary table of its name.

- agg_water_hours numbers each device's process lifetimes with window functions over every request the device
  served (four to six queries of a findings or weekly run read it, each a sort of all the requests); its rows are
  device-hours.
- agg_request_devices holds each device's totals and request-size quantile over its whole history; fct_instances,
  fct_prompt_capacity, fct_oom_instance_limits and fct_traffic_exposure read it, and through them most of the
  findings' queries; its rows are devices.
"""

from __future__ import annotations

import duckdb

from ..shared import materialized

WATER_HOURS = "agg_water_hours"
REQUEST_DEVICES = "agg_request_devices"


def water_hours_once(con: duckdb.DuckDBPyConnection) -> None:
    """agg_water_hours, computed once for the queries of a shared-results block."""
    materialized(con, WATER_HOURS)


def whole_history_once(con: duckdb.DuckDBPyConnection) -> None:
    """Every aggregate read whole, computed once for the queries of a shared-results block (a findings or weekly
    run reads each several times)."""
    for view in (WATER_HOURS, REQUEST_DEVICES):
        materialized(con, view)
