"""Water levels per device: time above the alert levels, predictive alerts, and the sizing findings.

Memory use is `reserved_after / device_total`: what the process holds between requests, which is what
`nvidia-smi` (less the CUDA context) and the article's 70/85/95 % alerts watch. A request's own peak
(`peak_allocated`, or reserved when higher) lasts only as long as the request, so it is reported beside the
level (share of requests peaking above each level) and drives the sizing rules, not the time above.
nvidia-smi telemetry is not ingested yet: other processes on the card are invisible here.
"""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import polars as pl

from ..sql import bind
from .findings import Finding

ALERT_LEVELS: tuple[float, ...] = (0.70, 0.85, 0.95)  # notice, warning, critical (domain.md)
# A request holds its level until the next one, but not across a longer gap: the device may have been
# idle or down, and we do not know what it held then.
MAX_HOLD_S = 1800
# Predictive alert: free memory below this multiple of the peak need of the largest recent request.
ALERT_NEED_FACTOR = 1.2


def window_params(since: datetime | None, until: datetime | None) -> dict[str, datetime | None]:
    """SQL parameters `since` / `until` as naive UTC, the way timestamps are stored."""
    return {"since": _naive_utc(since), "until": _naive_utc(until)}


def _naive_utc(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


# Shared by the analyses over fct_water_* and fct_prompt_*: the time window, both ends optional.
WINDOW_SQL = "($since::TIMESTAMP IS NULL OR ts >= $since) AND ($until::TIMESTAMP IS NULL OR ts < $until)"

# Per request in the window: `hold_s`, the seconds its held level lasted (until the next request, the
# window's end or MAX_HOLD_S).
_HELD = f"""
SELECT *,
       greatest(least(epoch(least(coalesce(next_ts, ts), coalesce($until::TIMESTAMP, next_ts, ts)))
                      - epoch(ts), $max_hold_s), 0) AS hold_s
FROM fct_water_requests
WHERE {WINDOW_SQL}
"""
# Per device and clock hour (`{above}`: the per-level columns): the time-weighted mean held level, the
# hold time above each level, the least free memory after a request, the largest need, and the predictive
# alert, evaluated hourly as an alert rule would be: the hour's least free memory below 1.2 x the largest
# peak need of that hour and the hour before. (A sliding one-hour window per request is exact but costs a
# range-window sort of every request: seconds per million.)
_HOURS = """
hours AS (
    SELECT instance, gpu_index, date_trunc('hour', ts) AS hour,
           max(device_total) AS device_total,
           count(*) AS requests,
           count(*) FILTER (WHERE is_oom) AS ooms,
           min(ts) AS first_ts,
           max(ts) AS last_ts,
           sum(hold_s) AS hold_s,
           {above},
           sum(held_level * hold_s) / nullif(sum(hold_s), 0) AS mean_held_level,
           max(held_level) AS max_held_level,
           max(peak_level) AS peak_level,
           max(peak_allocated) AS peak_allocated_bytes,
           max(reserved_after) AS peak_reserved_bytes,
           max(peak_bytes) AS peak_bytes,
           min(device_total - held_bytes) AS min_free_bytes,
           max(need_bytes) AS need_bytes
    FROM held
    GROUP BY ALL
),
alerts AS (
    SELECT *,
           coalesce(min_free_bytes < $need_factor * recent_need_bytes, false) AS alert,
           -- a new episode: an alerting hour whose previous clock hour did not alert
           coalesce(min_free_bytes < $need_factor * recent_need_bytes, false)
               AND NOT coalesce(lag(coalesce(min_free_bytes < $need_factor * recent_need_bytes, false))
                                OVER (PARTITION BY instance, gpu_index ORDER BY hour)
                                AND lag(hour) OVER (PARTITION BY instance, gpu_index ORDER BY hour)
                                    = hour - INTERVAL 1 HOUR, false) AS alert_starts
    FROM (SELECT *, max(need_bytes) OVER (PARTITION BY instance, gpu_index ORDER BY hour
                                          RANGE BETWEEN INTERVAL 1 HOUR PRECEDING AND CURRENT ROW)
                        AS recent_need_bytes
          FROM hours)
)
"""


def _params(since: datetime | None, until: datetime | None) -> dict[str, object]:
    """The window and the constants the water-level queries take as parameters."""
    levels = {f"level_{round(lv * 100)}": lv for lv in ALERT_LEVELS}
    constants = {"max_hold_s": MAX_HOLD_S, "need_factor": ALERT_NEED_FACTOR}
    return {**window_params(since, until), **constants, **levels}


def _per_level(hourly: str, device: str) -> tuple[str, str]:
    """Column lists for each alert level: `hourly` per hour, `device` summing the hours."""
    per_hour, per_device = [], []
    for level in ALERT_LEVELS:
        pct = round(level * 100)
        per_hour += [
            f"coalesce(sum(hold_s) FILTER (WHERE held_level >= $level_{pct}), 0) AS hold_above_{pct}",
            f"count(*) FILTER (WHERE peak_level >= $level_{pct}) AS peaks_above_{pct}"]
        per_device += [f"sum(hold_above_{pct}) / 3600 AS hours_above_{pct}",
                       f"sum(peaks_above_{pct}) / sum(requests) AS requests_peak_above_{pct}"]
    return hourly.join(per_hour), device.join(per_device)


_HOUR_LEVELS, _DEVICE_LEVELS = _per_level(",\n           ", ",\n       ")

# Everything per device is summed from the hours, so the requests are read once and never held.
_LEVELS = f"""
WITH held AS ({_HELD}),
{_HOURS.format(above=_HOUR_LEVELS)}
SELECT instance, gpu_index,
       max(device_total) AS device_total,
       sum(requests)::BIGINT AS requests,
       sum(ooms)::BIGINT AS ooms,
       min(first_ts) AS first_ts,
       max(last_ts) AS last_ts,
       sum(hold_s) / 3600 AS hours_observed,
       {_DEVICE_LEVELS},
       -- the median hour: time-weighted, as every clock hour counts once whatever its traffic
       median(mean_held_level) AS steady_level,
       max(max_held_level) AS max_held_level,
       max(peak_level) AS peak_level,
       max(peak_allocated_bytes) AS peak_allocated_bytes,
       max(peak_reserved_bytes) AS peak_reserved_bytes,
       max(peak_bytes) AS peak_bytes,
       coalesce(sum(hold_s) FILTER (WHERE alert), 0) / 3600 AS alert_hours,
       count(*) FILTER (WHERE alert_starts) AS alert_episodes
FROM alerts
GROUP BY instance, gpu_index
ORDER BY instance, gpu_index
"""


def water_levels(con: duckdb.DuckDBPyConnection, since: datetime | None = None,
                 until: datetime | None = None) -> pl.DataFrame:
    """Per device: hours observed, hours held above 70/85/95 %, share of requests peaking above them, the
    steady level (median over clock hours of the time-weighted held level), the peaks, and the hours and
    episodes of predictive alert."""
    return con.sql(_LEVELS, params=bind(_LEVELS, _params(since, until))).pl()


_EPISODES = f"""
WITH held AS ({_HELD}),
{_HOURS.format(above=_HOUR_LEVELS)},
runs AS (
    SELECT *, sum(alert_starts::INTEGER) OVER (PARTITION BY instance, gpu_index ORDER BY hour) AS run
    FROM alerts
)
SELECT instance, gpu_index,
       min(hour) AS start,
       max(hour) + INTERVAL 1 HOUR AS "end",
       sum(requests)::BIGINT AS requests,
       min(min_free_bytes) AS min_free_bytes,
       max(recent_need_bytes) AS largest_need_bytes,
       sum(ooms)::BIGINT AS ooms
FROM runs
WHERE alert
GROUP BY instance, gpu_index, run
ORDER BY instance, gpu_index, start
"""


def alert_episodes(con: duckdb.DuckDBPyConnection, since: datetime | None = None,
                   until: datetime | None = None) -> pl.DataFrame:
    """Predictive alert episodes per device: runs of consecutive clock hours whose least free memory was
    below 1.2 x the largest peak need of the hour and the hour before."""
    return con.sql(_EPISODES, params=bind(_EPISODES, _params(since, until))).pl()


def findings(con: duckdb.DuckDBPyConnection, since: datetime | None = None,
             until: datetime | None = None) -> list[Finding]:
    """Sizing findings (upgrade / downsize with the card to move to); see `sizing`."""
    from .sizing import sizing_findings  # sizing builds on this module's tables

    return sizing_findings(con, since, until)
