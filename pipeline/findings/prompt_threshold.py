"""prompt_threshold findings: per card (and model version) the batch x tokens above which requests run out of memory."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from ..analyses.fleet.card_names import total_label
from ..analyses.fleet.prompt_risk import RiskModel, card_thresholds, fit_risk_model
from ..analyses.fleet.prompt_threshold import METRICS, size_counts
from ..analyses.window import window_params
from ..load.sql import sql_text
from ..units import format_bytes
from .finding import Finding, Window


def findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """`prompt_threshold` findings: where requests start to fail on each card, and the cap to set.

    impact: the OOM requests on that card (and version) in the window whose size is above the threshold,
    whatever else was going on: a cap at the threshold would have refused them all.
    """
    counts = size_counts(con, since, until)
    table = card_thresholds(con, since, until, counts)
    if table.is_empty():
        return []
    model = fit_risk_model(con, since, until)
    params = window_params(since, until)
    ooms = (
        con.sql(sql_text("q_prompt_oom_counts"), params=params)
        .pl()
        .join(
            con.sql(sql_text("q_prompt_spans"), params=params).pl(), on=["device_total", "capacity_bytes"], how="left"
        )
    )
    return [
        _finding({**row, "card": total_label(con, row["device_total"])}, model, ooms, since, until)
        for row in table.iter_rows(named=True)
    ]


def card_cap(
    con: duckdb.DuckDBPyConnection, since: datetime, until: datetime, device_total: int, model_version: str | None
) -> Finding | None:
    """The threshold finding over [since, until) for a card of `device_total` bytes (the one for the model
    version, else the card-wide one) that sets a cap, or None: what an incident quotes of its week."""
    mine = [
        f
        for f in findings(con, since, until)
        if f.metrics.get("device_total") == device_total
        and f.metrics.get("cap")
        and f.metrics.get("model_version") in (None, model_version)
    ]
    return min(mine, key=lambda f: f.metrics.get("model_version") is None, default=None)


# Every OOM request, and each card's first and last request, in the window: few rows, read once.


def _finding(
    row: dict, model: RiskModel | None, ooms: pl.DataFrame, since: datetime | None, until: datetime | None
) -> Finding:
    """One threshold as a finding."""
    mine = ooms.filter(
        (pl.col("device_total") == row["device_total"]) & (pl.col("capacity_bytes") == row["capacity_bytes"])
    )
    if row["scope"] == "version":
        mine = mine.filter(pl.col("model_version") == row["model_version"])
    explained = int(
        mine.filter((pl.col("metric") == row["metric"]) & (pl.col("own_size") > row["threshold"]))["ooms"].sum()
    )
    support = row["ooms"] / (row["ooms"] + 3)  # a handful of failures is a hint, a hundred a fact
    purity = 1 - row["errors"] / (row["ooms"] + row["errors"])
    first, last = (mine[c].min() if mine.height else None for c in ("first_ts", "last_ts"))
    return Finding(
        kind="prompt_threshold",
        subject=_subject(row),
        evidence=_evidence(row, model),
        advice=_sentence(row),
        confidence=round(support * purity, 2),
        impact=float(explained),
        window=Window(since or _moment(first), until or _moment(last)),
        metrics=_metrics(row, model) | {"ooms_above_threshold": explained},
    )


def _moment(value: object) -> datetime | None:
    return value if isinstance(value, datetime) else None


def _subject(row: dict) -> str:
    """'A10 24 GB' or 'H200 141 GB with 4.51 GiB usable', plus the version when per version."""
    name = row["card"]
    if row["capacity_bytes"] != row["device_total"]:
        name += f" with {format_bytes(row['capacity_bytes'], 'GiB')} usable"
    return name if row["scope"] == "card" else f"{name}, {row['model_version']}"


def _sentence(row: dict) -> str:
    """The sentence a person can act on."""
    metric = METRICS[row["metric"]]
    usable = (
        ""
        if row["capacity_bytes"] == row["device_total"]
        else f" (with {format_bytes(row['capacity_bytes'], 'GiB')} usable beside other processes or a cap)"
    )
    return (
        f"On {row['card']} cards{usable} running {row['versions']}, {metric} above "
        f"{row['threshold']:,.0f} fails {row['failure_rate_above']:.0%} of the time; cap it at "
        f"{row['cap']:,} (10 % below the largest clean success, {row['largest_success']:,})."
    )


def _evidence(row: dict, model: RiskModel | None) -> str:
    """The boundary and the model's scores."""
    text = (
        f"{row['requests']:,} clean requests ({row['ooms']} OOMs): the largest success below the cut is "
        f"{row['largest_success']:,} and the smallest failure above it {row['smallest_failure']:,} "
        f"{METRICS[row['metric']]}; {row['failures_above']} of {row['requests_above']} requests above "
        f"failed, {row['errors']} fell on the wrong side."
    )
    if row["adjusted_requests"]:
        text += (
            f" {row['adjusted_requests']:,} of the requests stood on a baseline a leak or resident growth had "
            f"raised and are sized as on a fresh process; {row['failures_above_by_own_size']} failures are above "
            f"the cut and every success by their own size."
        )
    if model is not None:
        text += (
            f" Logistic model over {model.requests:,} clean requests: {model.folds}-fold CV AUC "
            f"{model.cv_auc:.4f}, log-loss {model.cv_log_loss:.4f} "
            f"(base rate {model.base_log_loss:.4f})."
        )
    return text


def _metrics(row: dict, model: RiskModel | None) -> dict[str, object]:
    """The finding's numbers, JSON-ready."""
    keep = (
        "device_total",
        "capacity_bytes",
        "model_version",
        "versions",
        "metric",
        "threshold",
        "largest_success",
        "smallest_failure",
        "max_success",
        "min_failure",
        "errors",
        "requests",
        "ooms",
        "failures_above",
        "failures_above_by_own_size",
        "adjusted_requests",
        "requests_above",
        "failure_rate_above",
        "failure_rate_below",
        "cap",
        "scope",
    )
    out = {k: row.get(k) for k in keep}
    if model is not None:
        out |= {
            "cv_auc": model.cv_auc,
            "cv_log_loss": model.cv_log_loss,
            "base_log_loss": model.base_log_loss,
            "cv_folds": model.folds,
        }
    return out
