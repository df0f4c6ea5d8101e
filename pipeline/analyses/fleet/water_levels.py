"""Water levels per device: time above the alert levels and predictive alerts (sizing builds on them).

Memory use is `reserved_after / device_total`: what the process holds between requests, which is what
`nvidia-smi` (less the CUDA context) and the article's 70/85/95 % alerts watch. A request's own peak
(`peak_allocated`, or reserved when higher) lasts only as long as the request, so it is reported beside the
level (share of requests peaking above each level) and drives the sizing rules, not the time above.
Where telemetry covers a device (nvidia-smi or DCGM samples in `gpu_samples`), the levels gain `telemetry_*`
columns from the card's used / total, which see the CUDA context and other processes too, and the predictive
alert reads the least free memory the telemetry saw when that is lower (`level_source` says which devices).
"""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from ...load.sql import sql_text
from ..shared import shared
from ..window import window_params
from .whole_history import water_hours_once

# The alert levels, the hold limit and the need factor the queries apply are settings of the SQL
# (ALERT_LEVELS, MAX_HOLD_S, ALERT_NEED_FACTOR in oomlab.load.settings): only the window is a parameter.


@shared()
def water_levels(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """Per device: hours observed, hours held above 70/85/95 %, share of requests peaking above them, the
    steady level (median over clock hours of the time-weighted held level), the peaks, and the hours and
    episodes of predictive alert."""
    water_hours_once(con)
    levels = con.sql(sql_text("q_water_levels"), params=window_params(since, until)).pl()
    return _with_telemetry(con, levels, window_params(since, until))


def _with_telemetry(
    con: duckdb.DuckDBPyConnection, levels: pl.DataFrame, window: dict[str, datetime | None]
) -> pl.DataFrame:
    """The request-based levels with the device's telemetry levels beside them (NULL where none)."""
    device = con.sql(sql_text("q_water_telemetry"), params=window).pl()
    if levels.is_empty():
        return levels
    joined = levels.join(
        device.cast({"gpu_index": levels.schema["gpu_index"]}), on=["instance", "gpu_index"], how="left"
    )
    source = pl.when(pl.col("telemetry_samples") > 0).then(pl.lit("telemetry")).otherwise(pl.lit("requests"))
    return joined.with_columns(source.alias("level_source"))


def alert_episodes(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> pl.DataFrame:
    """Predictive alert episodes per device: runs of consecutive clock hours whose least free memory was
    below ALERT_NEED_FACTOR (1.2) x the largest peak need of the hour and the hour before."""
    water_hours_once(con)
    return con.sql(sql_text("q_water_alert_episodes"), params=window_params(since, until)).pl()
