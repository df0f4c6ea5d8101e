"""Prometheus alerting rules over DCGM's frame-buffer metrics, tuned per device from the fleet's data.

The rules (docs/domain.md): three levels of used memory (notice 70 %, warning 85 %, critical 95 %); a gradient
rule (a steady climb of 30 points in 30 minutes, the article's 40 % -> 70 %: a leak more than traffic); a
predictive rule (`predict_linear`: free memory runs out within the hour); and, where the database knows
the largest request a device served, a headroom rule (free below 1.2 x that request's need).

DCGM reports `DCGM_FI_DEV_FB_USED` and `DCGM_FI_DEV_FB_FREE` in MiB per GPU with the labels `gpu`,
`Hostname` and `modelName`; the level is used / (used + free). oomlab's instance is DCGM's `Hostname` and
its GPU index DCGM's `gpu`.

Tuning: a device whose steady level (water_levels: the median hour's held level) comes within
`TUNE_MARGIN` of the notice level would raise the level alerts all day, as a pre-allocated pool (vLLM's
`gpu_memory_utilization`) or an allocator that keeps its cache does. Its levels are re-based on the memory
it normally leaves free: a level L becomes steady + (1 - steady) x L, so notice means 70 % of its headroom
is gone. Such a device gets no headroom rule either: its requests draw from memory it already holds, which
DCGM counts as used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb
import yaml

from ...load.settings import ALERT_LEVELS, ALERT_NEED_FACTOR
from ...load.sql import sql_text
from ...units import MIB, format_bytes
from .water_levels import water_levels
from .whole_history import water_hours_once

USED, FREE = "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"
METRICS = (USED, FREE)
SEVERITIES = ("notice", "warning", "critical")
# How long a level must hold: a request's own peak lasts seconds (DCGM samples every 30 s), a level
# that holds for minutes is the process's; the closer to an OOM, the sooner a person should know.
LEVEL_FOR = {"notice": "15m", "warning": "10m", "critical": "2m"}
TUNE_MARGIN = 0.05  # a steady level this close to the notice level would fire on ordinary hours
GRADIENT_POINTS = 0.30  # 40 % -> 70 % ...
GRADIENT_WINDOW_S = 1800  # ... in 30 minutes
PREDICT_RANGE, PREDICT_AHEAD_S = "1h", 3600
GROUP_NAME = "oomlab-gpu-memory"


@dataclass(frozen=True)
class DeviceTuning:
    """One device's alert levels and, when known, the largest need of a request it served."""

    instance: str
    gpu_index: int
    steady_level: float
    levels: tuple[float, float, float]  # notice, warning, critical
    largest_need_bytes: int | None

    @property
    def tuned(self) -> bool:
        """Whether its levels differ from the article's."""
        return self.levels != ALERT_LEVELS


@dataclass(frozen=True)
class AlertRule:
    """One Prometheus alerting rule."""

    alert: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str

    def to_dict(self) -> dict[str, object]:
        """The rule as Prometheus's rule file writes it."""
        return {
            "alert": self.alert,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity},
            "annotations": {"summary": self.summary, "description": self.description},
        }


def tuned_levels(steady_level: float) -> tuple[float, float, float]:
    """The article's levels, or re-based on the headroom when the steady level is near the notice level."""
    if steady_level <= round(ALERT_LEVELS[0] - TUNE_MARGIN, 6):
        return ALERT_LEVELS  # type: ignore[return-value]
    return tuple(round(steady_level + (1 - steady_level) * lv, 4) for lv in ALERT_LEVELS)  # type: ignore[return-value]


def device_tunings(con: duckdb.DuckDBPyConnection) -> list[DeviceTuning]:
    """Every device with requests in the database: its steady level, levels and largest request need."""
    water_hours_once(con)
    needs = {(instance, gpu): need for instance, gpu, need in con.execute(sql_text("q_alert_device_needs")).fetchall()}
    return [
        DeviceTuning(
            r["instance"],
            r["gpu_index"],
            r["steady_level"],
            tuned_levels(r["steady_level"]),
            needs.get((r["instance"], r["gpu_index"])),
        )
        for r in water_levels(con).iter_rows(named=True)
        if r["steady_level"] is not None
    ]


def _quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _selector(device: DeviceTuning) -> str:
    return f"{{Hostname={_quote(device.instance)},gpu={_quote(str(device.gpu_index))}}}"


def _level(selector: str = "") -> str:
    """Used memory as a share of the card, for one device or all."""
    return f"{USED}{selector} / ({USED}{selector} + {FREE}{selector})"


def _excluding(expr: str, devices: list[DeviceTuning]) -> str:
    """`expr` for every device but these (they have rules of their own)."""
    if not devices:
        return expr
    others = " or ".join(f"{USED}{_selector(d)}" for d in devices)
    return f"({expr}) unless on(Hostname, gpu) ({others})"


def level_rules(tunings: list[DeviceTuning]) -> list[AlertRule]:
    """The three levels: one rule each for the untuned devices, one per tuned device."""
    tuned = [d for d in tunings if d.tuned]
    rules = []
    for i, severity in enumerate(SEVERITIES):
        rules.append(
            _level_rule(
                severity, ALERT_LEVELS[i], _excluding(f"{_level()} > {ALERT_LEVELS[i]}", tuned), "the article's level"
            )
        )
        rules.extend(
            _level_rule(
                severity,
                d.levels[i],
                f"{_level(_selector(d))} > {d.levels[i]}",
                f"tuned: its steady level is {_percent(d.steady_level)}, so this is "
                f"{_percent(ALERT_LEVELS[i])} of the memory it normally leaves free",
            )
            for d in tuned
        )
    return rules


def _level_rule(severity: str, level: float, expr: str, why: str) -> AlertRule:
    return AlertRule(
        alert=f"GpuMemory{severity.capitalize()}",
        expr=expr,
        for_=LEVEL_FOR[severity],
        severity=severity,
        summary=f"GPU memory above {_percent(level)} on {{{{ $labels.Hostname }}}} GPU {{{{ $labels.gpu }}}}",
        description=(
            f"{{{{ $labels.modelName }}}} on {{{{ $labels.Hostname }}}} GPU {{{{ $labels.gpu }}}} uses "
            f"{{{{ $value | humanizePercentage }}}} of its memory ({why}: {_percent(level)})."
        ),
    )


def _percent(level: float) -> str:
    return f"{level * 100:.4g} %"


def gradient_rule() -> AlertRule:
    """A steady climb: 30 points per 30 minutes in both halves of the last 30 minutes (a jump, which is
    traffic or a start-up, lands in one half only)."""
    half = f"{GRADIENT_WINDOW_S // 120}m"
    rate = f"{GRADIENT_WINDOW_S} / ({USED} + {FREE})"
    expr = (
        f"deriv({USED}[{half}]) * {rate} > {GRADIENT_POINTS} "
        f"and deriv({USED}[{half}] offset {half}) * {rate} > {GRADIENT_POINTS}"
    )
    return AlertRule(
        alert="GpuMemoryClimbing",
        expr=expr,
        for_="5m",
        severity="warning",
        summary="GPU memory climbing steadily on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
        description=(
            "Used memory on {{ $labels.Hostname }} GPU {{ $labels.gpu }} ({{ $labels.modelName }}) rose "
            f"{GRADIENT_POINTS:.0%} of the card per {GRADIENT_WINDOW_S // 60} minutes, steadily: a leak "
            "is more likely than traffic. Check `allocated_after` with `oomlab findings`."
        ),
    )


def predict_rule() -> AlertRule:
    """Free memory runs out within the hour on the last hour's trend, while it is still falling (a step
    that has ended, such as a pool allocated at start-up, stays in the hour's trend but not in the last
    15 minutes')."""
    expr = f"predict_linear({FREE}[{PREDICT_RANGE}], {PREDICT_AHEAD_S}) < 0 and deriv({FREE}[15m]) < 0"
    return AlertRule(
        alert="GpuMemoryExhaustedWithinHour",
        expr=expr,
        for_="10m",
        severity="warning",
        summary="GPU memory will run out within the hour on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
        description=(
            "On the last hour's trend, free memory on {{ $labels.Hostname }} GPU {{ $labels.gpu }} "
            "({{ $labels.modelName }}) reaches zero within the next hour."
        ),
    )


def headroom_rules(tunings: list[DeviceTuning]) -> list[AlertRule]:
    """Free memory below 1.2 x the largest need a request had on the device (untuned devices only)."""
    return [_headroom_rule(d, d.largest_need_bytes) for d in tunings if not d.tuned and d.largest_need_bytes]


def _headroom_rule(device: DeviceTuning, need_bytes: int) -> AlertRule:
    need_mib = math.ceil(ALERT_NEED_FACTOR * need_bytes / MIB)
    return AlertRule(
        alert="GpuMemoryHeadroomLow",
        expr=f"{FREE}{_selector(device)} < {need_mib}",
        for_="5m",
        severity="warning",
        summary="Free GPU memory below the largest request's need on {{ $labels.Hostname }} GPU {{ $labels.gpu }}",
        description=(
            f"{{{{ $value }}}} MiB free; the largest request this device served added "
            f"{format_bytes(need_bytes, 'MiB', 0, grouped=True)} at its peak, and the rule keeps "
            f"{ALERT_NEED_FACTOR} x that ({need_mib:,} MiB) free."
        ),
    )


def rules_document(tunings: list[DeviceTuning] | None = None) -> dict[str, object]:
    """The rule file as a document: one group with every rule; untuned when `tunings` is None or empty."""
    tunings = tunings or []
    rules = [*level_rules(tunings), gradient_rule(), predict_rule(), *headroom_rules(tunings)]
    return {"groups": [{"name": GROUP_NAME, "rules": [r.to_dict() for r in rules]}]}


def to_yaml(document: dict[str, object]) -> str:
    """The document as a Prometheus rule file, keys in the order written."""
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=1 << 16)  # one line per expression
