"""prompt_threshold findings: per card (and model version) the batch x tokens above which requests run out of memory."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from ..analyses.fleet.card_names import total_label
from ..analyses.fleet.classify import classify_ooms
from ..analyses.fleet.prompt_risk import RiskModel, card_thresholds, fit_risk_model
from ..analyses.fleet.prompt_threshold import METRICS, size_counts
from ..analyses.window import window_params
from ..load.sql import sql_text
from ..units import format_bytes
from .finding import Finding, Window

# Causes other than the request's own size (analyses/fleet/classify_rules.py). An OOM above a threshold that the
# classifier gave to one of them is that cause's, not the threshold's: its own size lies between the cut and the
# card's real edge, where no success shows which side of it it is on, and its bytes say it fitted on a fresh
# baseline with nobody beside it (fleet 72504 of bench/truth.py: 3 leak OOMs at 46,368 to 46,592 tokens above a cut
# at 46,261, the planted edge at 46,959). A cap would refuse them too; but each OOM is counted by one cause.
OTHER_CAUSES = ("leak", "external_pressure", "fragmentation")
# A neighbour is another cause only where the card is the whole device: where the threshold's card is the
# capacity usable beside a persistent neighbour (fct_prompt_capacity), that neighbour is part of the card, and an
# OOM beside it is the threshold's (the real H200 serve_mixed: 4 OOMs with 4.51 GiB usable beside another process).
NEIGHBOUR_CAUSE = "external_pressure"
# And the other way: an OOM the classifier found too large for the card on a fresh baseline (`capacity`) is the
# threshold's even at or below the cut. Bytes per token vary per request, so sizes within about 1 % of the edge go
# either way, and the cut, midway between the largest success and the smallest failure, can fall just above a
# failure whose bytes show it too large (fleet 72521 of bench/truth.py: two at 100,712 and 100,832 batch x tokens
# under a cut at 101,342).
SIZE_CAUSE = "capacity"
_DEVICE_SIZE = ["instance", "gpu_index", "model_version", "metric", "own_size"]


def findings(
    con: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[Finding]:
    """`prompt_threshold` findings: where requests start to fail on each card, and the cap to set.

    impact: the OOM requests on that card (and version) in the window that failed for their size: above the
    threshold by their own size unless the classifier gave them to another cause (OTHER_CAUSES), at or below it
    where the classifier found them too large for the card (SIZE_CAUSE).
    """
    counts = size_counts(con, since, until)
    table = card_thresholds(con, since, until, counts)
    if table.is_empty():
        return []
    model = fit_risk_model(con, since, until)
    params = window_params(since, until)
    ooms = _own_size_ooms(con, since, until).join(
        con.sql(sql_text("q_prompt_spans"), params=params).pl(), on=["device_total", "capacity_bytes"], how="left"
    )
    return [
        _finding({**row, "card": total_label(con, row["device_total"])}, model, ooms, since, until)
        for row in table.iter_rows(named=True)
    ]


def _own_size_ooms(con: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None) -> pl.DataFrame:
    """q_prompt_oom_counts with, per device, version and own size, how many of those OOMs the classifier gave to
    another cause (`other_cause`) and how many it found too large for the card (`size_cause`), each at most `ooms`."""
    counts = con.sql(sql_text("q_prompt_oom_counts"), params=window_params(since, until)).pl()
    classified = classify_ooms(con, since, until).filter(pl.col("cause").is_in([*OTHER_CAUSES, SIZE_CAUSE]))
    sized = pl.concat(
        classified.select(
            "instance",
            pl.col("gpu_index").cast(counts.schema["gpu_index"]),
            "model_version",
            pl.lit(metric).alias("metric"),
            pl.col(column).cast(counts.schema["own_size"]).alias("own_size"),
            "cause",
        )
        for metric, column in (("batch_x_tokens", "tokens"), ("batch_x_input", "batch_x_input"))
    )
    causes = (
        sized.drop_nulls("own_size")
        .group_by(_DEVICE_SIZE)
        .agg(
            pl.col("cause").is_in(OTHER_CAUSES).sum().alias("other_cause"),
            (pl.col("cause") == NEIGHBOUR_CAUSE).sum().alias("neighbour"),
            (pl.col("cause") == SIZE_CAUSE).sum().alias("size_cause"),
        )
    )
    whole_device = pl.col("capacity_bytes") == pl.col("device_total")
    other = pl.col("other_cause") - pl.when(whole_device).then(0).otherwise(pl.col("neighbour"))
    return (
        counts.join(causes, on=_DEVICE_SIZE, how="left", nulls_equal=True)
        .with_columns(pl.col(c).fill_null(0).cast(pl.Int64) for c in ("other_cause", "neighbour", "size_cause"))
        .with_columns(other.alias("other_cause"))
        .with_columns(pl.min_horizontal(c, "ooms").alias(c) for c in ("other_cause", "size_cause"))
        .drop("neighbour")
    )


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
    above = pl.col("own_size") > row["threshold"]
    split = (
        mine.filter(pl.col("metric") == row["metric"])
        .select(
            pl.col("other_cause").filter(above).sum().alias("others_above"),
            pl.col("size_cause").filter(~above).sum().alias("sized_below"),
            (pl.col("ooms") - pl.col("other_cause")).filter(above).sum().alias("by_size_above"),
        )
        .row(0, named=True)
    )
    by_size = int(split["by_size_above"] + split["sized_below"])
    support = row["ooms"] / (row["ooms"] + 3)  # a handful of failures is a hint, a hundred a fact
    purity = 1 - row["errors"] / (row["ooms"] + row["errors"])
    first, last = (mine[c].min() if mine.height else None for c in ("first_ts", "last_ts"))
    return Finding(
        kind="prompt_threshold",
        subject=_subject(row),
        evidence=_evidence(row, model) + _attribution(split),
        advice=_sentence(row),
        confidence=round(support * purity, 2),
        impact=float(by_size),
        window=Window(since or _moment(first), until or _moment(last)),
        metrics=_metrics(row, model) | {"ooms_by_size": by_size},
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


def _attribution(split: dict[str, int]) -> str:
    """How the OOMs it counts differ from those above the cut, where they do (OTHER_CAUSES, SIZE_CAUSE)."""
    parts = []
    if split["others_above"]:
        parts.append(f"{split['others_above']} above it failed for a leak, a neighbour or a fragmented cache")
    if split["sized_below"]:
        parts.append(f"{split['sized_below']} at or below it needed more than the card serves by their bytes")
    return f" Of the OOMs, {' and '.join(parts)} (classified one by one)." if parts else ""


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
