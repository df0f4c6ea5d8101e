"""The constants SQL and Python share, defined once: sql/macros/oomlab_settings.sql, one macro per constant.

Views and queries call the macros (`ALERT_LEVELS()`); Python reads the same literals from that file under the
same names, so a value changes in one place. The reason for each value is written beside it in the SQL file.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TypeVar

from ..errors import DatabaseError
from .sql import sql_text

_FILE = "oomlab_settings"
_COMMENT = re.compile(r"--[^\n]*")
_MACRO = re.compile(r"CREATE OR REPLACE MACRO (\w+)\(\) AS (.+?);", re.DOTALL)
_INTERVAL_UNITS = {"SECOND": "seconds", "MINUTE": "minutes", "HOUR": "hours", "DAY": "days"}

Value = int | float | tuple[float, ...] | timedelta | datetime
_T = TypeVar("_T")


def _literal(text: str) -> Value:
    """A Python value of one of the literals the settings file is allowed: an integer, a decimal (as a
    float), `x::DOUBLE`, a list `[...]::DOUBLE[]`, `INTERVAL n UNIT` or `TIMESTAMP '...'`."""
    text = " ".join(text.split())
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d+(::DOUBLE)?", text):
        return float(text.removesuffix("::DOUBLE"))
    if items := re.fullmatch(r"\[([-\d., ]+)\]::DOUBLE\[\]", text):
        return tuple(float(item) for item in items.group(1).split(","))
    if interval := re.fullmatch(r"INTERVAL (\d+) (SECOND|MINUTE|HOUR|DAY)", text):
        return timedelta(**{_INTERVAL_UNITS[interval.group(2)]: int(interval.group(1))})
    if stamp := re.fullmatch(r"TIMESTAMP '([^']+)'", text):
        return datetime.fromisoformat(stamp.group(1))
    raise DatabaseError(f"{_FILE}.sql: {text!r} is not a literal the settings may hold")


def read_settings() -> dict[str, Value]:
    """Every setting of the SQL file by its name."""
    code = _COMMENT.sub("", sql_text(_FILE))
    found = {name: _literal(value) for name, value in _MACRO.findall(code)}
    if not found or len(found) != code.count("CREATE "):
        raise DatabaseError(f"{_FILE}.sql: every statement must be `CREATE OR REPLACE MACRO NAME() AS literal;`")
    return found


_SETTINGS = read_settings()


def _get(name: str, kind: type[_T]) -> _T:
    """One setting, checked to be of the kind its Python users expect."""
    value = _SETTINGS[name]
    if not isinstance(value, kind):
        raise DatabaseError(f"{_FILE}.sql: {name} is {value!r}, not a {kind.__name__}")
    return value


ALERT_LEVELS: tuple[float, ...] = _get("ALERT_LEVELS", tuple)
ALERT_NEED_FACTOR = _get("ALERT_NEED_FACTOR", float)
MAX_HOLD_S = _get("MAX_HOLD_S", int)
INCIDENT_HOUR_REQUESTS = _get("INCIDENT_HOUR_REQUESTS", int)
BASELINE_BUCKETS = _get("BASELINE_BUCKETS", int)
MIN_BUCKET_US = _get("MIN_BUCKET_US", int)
BASELINE_LOOKBACK_BUCKETS = _get("BASELINE_LOOKBACK_BUCKETS", int)
RESTART_RETURN_SHARE = _get("RESTART_RETURN_SHARE", float)
BASELINE_DROP_MIN_BYTES = _get("BASELINE_DROP_MIN_BYTES", int)
LIFETIME_GAP = _get("LIFETIME_GAP", timedelta)
LEAK_REQUESTS_PER_WINDOW = _get("LEAK_REQUESTS_PER_WINDOW", int)
LEAK_MAX_WINDOWS = _get("LEAK_MAX_WINDOWS", int)
LEAK_END_BUCKETS = _get("LEAK_END_BUCKETS", int)
RESTART_DROP_MIN_BYTES = _get("RESTART_DROP_MIN_BYTES", int)
RESTART_DROP_SHARE = _get("RESTART_DROP_SHARE", float)
RAISED_BASELINE_BYTES = _get("RAISED_BASELINE_BYTES", int)
SIZE_COST_MAX_ERROR = _get("SIZE_COST_MAX_ERROR", float)
FRAGMENTED_REQUEST_MULTIPLE = _get("FRAGMENTED_REQUEST_MULTIPLE", int)
FRAGMENTED_CARD_SHARE = _get("FRAGMENTED_CARD_SHARE", float)
PROMPT_MODEL_ROWS = _get("PROMPT_MODEL_ROWS", int)
LARGE_REQUEST_QUANTILE = _get("LARGE_REQUEST_QUANTILE", float)
NEIGHBOUR_ROUND_MAX_AGE = _get("NEIGHBOUR_ROUND_MAX_AGE", timedelta)
CONTEXT_ALLOWANCE_BYTES = _get("CONTEXT_ALLOWANCE_BYTES", int)
CONTEXT_MAX_BYTES = _get("CONTEXT_MAX_BYTES", int)
WEEK_ORIGIN = _get("WEEK_ORIGIN", datetime)
BLOCK_ROUNDING_BYTES = _get("BLOCK_ROUNDING_BYTES", int)
RECENT_NEEDS_DAYS = _get("RECENT_NEEDS_DAYS", int)
MIN_RATE_SPAN_S = _get("MIN_RATE_SPAN_S", int)
CARD_MIN_BYTES = _get("CARD_MIN_BYTES", int)
CARD_MAX_BYTES = _get("CARD_MAX_BYTES", int)
IMPLAUSIBLE_LATENCY_MS = _get("IMPLAUSIBLE_LATENCY_MS", int)
TS_EARLIEST = _get("TS_EARLIEST", datetime)
TS_LATEST = _get("TS_LATEST", datetime)
TS_AHEAD = _get("TS_AHEAD", timedelta)
MAX_RECORD_BYTES = _get("MAX_RECORD_BYTES", int)
