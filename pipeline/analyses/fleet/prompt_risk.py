"""Prompt risk: a cross-validated scikit-learn model of OOM probability from the request's shape and the
card, and `prompt_threshold` findings that say where to cap batch x tokens.

The model is a logistic regression on clean requests (fct_prompt_requests: OOMs of a raised baseline, an
intermittent neighbour process or fragmentation are left out, as are the requests of a raised baseline) with
the log of batch, input, output, batch x input, batch x (input + output) and batch x tokens per GiB of usable
memory, the usable memory itself, and the model version one-hot. It is scored by stratified k-fold
cross-validation (AUC and log-loss, against the log-loss of predicting the OOM share for everyone).
The sentence's numbers come from the direct boundary (prompt_threshold), which needs no model to trust.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb
import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_validate
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from ...findings.finding import Finding, Window
from ...load.sql import sql_text
from .prompt_threshold import METRICS, size_counts, thresholds
from .sizing import GIB, card_name
from .water_levels import window_params

CV_FOLDS = 5
MAX_MODEL_ROWS = 50_000  # ~2 s of 5-fold CV on two cores; a boundary this sharp needs no more
SEED = 0
AGREE_WITHIN = 0.05  # versions whose thresholds on a card agree this closely get one finding
NUMERIC = (
    "batch_size",
    "input_sequence_length",
    "output_sequence_length",
    "batch_x_input",
    "batch_x_tokens",
    "tokens_per_gib",
)


@dataclass(frozen=True, eq=False)
class RiskModel:
    """The fitted model, the versions it one-hot encodes, and its cross-validated scores."""

    pipeline: Pipeline
    versions: tuple[str, ...]
    requests: int
    ooms: int
    folds: int
    cv_auc: float
    cv_log_loss: float
    base_log_loss: float  # predicting the OOM share for every request

    def predict(self, frame: pl.DataFrame) -> np.ndarray:
        """P(OOM) for requests with the columns of fct_prompt_requests."""
        return self.pipeline.predict_proba(features(frame, self.versions))[:, 1]


def features(frame: pl.DataFrame, versions: tuple[str, ...]) -> np.ndarray:
    """The model's design matrix: log sizes, usable GiB, and one column per known model version."""
    gib = frame["capacity_bytes"].to_numpy().astype(float) / GIB
    per_gib = pl.col("batch_x_tokens") / (pl.col("capacity_bytes") / GIB)
    sized = frame.with_columns(per_gib.alias("tokens_per_gib"))
    columns = [np.log1p(sized[c].to_numpy().astype(float)) for c in NUMERIC] + [gib]
    version = frame["model_version"].to_numpy()
    columns += [(version == v).astype(float) for v in versions]
    return np.column_stack(columns)


def model_rows(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    clean_requests: int | None = None,
) -> pl.DataFrame:
    """The clean requests the model learns from: all of them, or an even sample of about MAX_MODEL_ROWS.
    `clean_requests`: their number, if known."""
    params = window_params(since, until)
    if clean_requests is None:
        clean_requests = int(con.sql(sql_text("q_prompt_clean_count"), params=params).fetchall()[0][0])
    every = max(1, -(-clean_requests // MAX_MODEL_ROWS))
    return con.sql(sql_text("q_prompt_clean_requests"), params=params | {"every": every}).pl()


def fit_risk_model(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    folds: int = CV_FOLDS,
    clean_requests: int | None = None,
) -> RiskModel | None:
    """Fit on clean requests and cross-validate; None when there are too few OOMs for `folds` folds."""
    clean = model_rows(con, since, until, clean_requests)
    target = clean["is_oom"].to_numpy().astype(int)
    if target.sum() < folds or (1 - target).sum() < folds:
        return None
    versions = tuple(sorted(set(clean["model_version"].drop_nulls())))
    x = features(clean, versions)
    # Strong but finite regularisation: the boundary is sharp and a plain fit would diverge on it.
    regression = LogisticRegression(C=10.0, solver="newton-cholesky", max_iter=200)
    pipeline = make_pipeline(StandardScaler(), regression)
    scores = cross_validate(
        pipeline,
        x,
        target,
        scoring=("roc_auc", "neg_log_loss"),
        cv=StratifiedKFold(folds, shuffle=True, random_state=SEED),
    )
    share = target.mean()
    return RiskModel(
        pipeline=pipeline.fit(x, target),
        versions=versions,
        requests=len(target),
        ooms=int(target.sum()),
        folds=folds,
        cv_auc=float(scores["test_roc_auc"].mean()),
        cv_log_loss=float(-scores["test_neg_log_loss"].mean()),
        base_log_loss=float(-(share * np.log(share) + (1 - share) * np.log(1 - share))),
    )


def card_thresholds(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    counts: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The thresholds to report: one per card when its versions agree (within 5 %, same metric) with the
    card's pooled boundary, else one per version. `scope` says which."""
    counts = size_counts(con, since, until) if counts is None else counts
    per_version = thresholds(con, since, until, per_version=True, counts=counts)
    pooled = thresholds(con, since, until, per_version=False, counts=counts)
    if per_version.is_empty():
        return per_version
    out = []
    for key, versions in per_version.group_by("device_total", "capacity_bytes", maintain_order=True):
        card = pooled.filter((pl.col("device_total") == key[0]) & (pl.col("capacity_bytes") == key[1]))
        if card.height and _agree(versions, card.row(0, named=True)):
            out.append(card.with_columns(pl.lit("card").alias("scope")))
        else:
            out.append(versions.with_columns(pl.lit("version").alias("scope")))
    return pl.concat(out, how="diagonal_relaxed")


def _agree(versions: pl.DataFrame, card: dict) -> bool:
    """Every version's threshold in the card's metric, and within 5 % of the card's."""
    same_metric = (versions["metric"] == card["metric"]).all()
    spread = (versions["threshold"] / card["threshold"] - 1).abs().max()
    return bool(same_metric) and spread <= AGREE_WITHIN  # type: ignore[operator]


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
    one_metric = counts.filter(pl.col("metric") == "batch_x_input")
    clean = int(one_metric.select(pl.col("oks").sum() + pl.col("fails").sum()).item())
    model = fit_risk_model(con, since, until, clean_requests=clean)
    params = window_params(since, until)
    ooms = (
        con.sql(sql_text("q_prompt_oom_counts"), params=params)
        .pl()
        .join(
            con.sql(sql_text("q_prompt_spans"), params=params).pl(), on=["device_total", "capacity_bytes"], how="left"
        )
    )
    return [_finding(row, model, ooms, since, until) for row in table.iter_rows(named=True)]


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
    explained = mine.filter(pl.col(row["metric"]) > row["threshold"]).height
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
    name = card_name(row["device_total"])
    if row["capacity_bytes"] != row["device_total"]:
        name += f" with {row['capacity_bytes'] / GIB:.2f} GiB usable"
    return name if row["scope"] == "card" else f"{name}, {row['model_version']}"


def _sentence(row: dict) -> str:
    """The sentence a person can act on."""
    metric = METRICS[row["metric"]]
    usable = (
        ""
        if row["capacity_bytes"] == row["device_total"]
        else f" (with {row['capacity_bytes'] / GIB:.2f} GiB usable beside other processes or a cap)"
    )
    return (
        f"On {card_name(row['device_total'])} cards{usable} running {row['versions']}, {metric} above "
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
